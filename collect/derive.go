package collect

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/report"
)

// Record fields the derived tables read, by their JSON names in the
// envelope (survey/record.go, survey/summary.go, patterns/test.go); collect
// reads results only as JSON, never through the measuring packages.
type derivedLine struct {
	Type string `json:"type"`
	// survey "probe": the stored row has the record's own field names.
	store.SurveyProbe
	// survey "summary"
	Cells []struct {
		ProbePath       string  `json:"probe_path"`
		ResolvePath     string  `json:"resolve_path"`
		Targets         int64   `json:"targets"`
		Responsive      int64   `json:"responsive"`
		Unresponsive    int64   `json:"unresponsive"`
		UnresponsivePct float64 `json:"unresponsive_pct"`
		RTT             struct {
			P10  *float64 `json:"p10"`
			P25  *float64 `json:"p25"`
			P50  float64  `json:"p50"`
			P75  *float64 `json:"p75"`
			P90  *float64 `json:"p90"`
			Mean float64  `json:"mean"`
		} `json:"rtt_ms"`
	} `json:"cells"`
	// patterns "pattern_test"
	Index  int64 `json:"index"`
	Config struct {
		Pattern   string `json:"pattern"`
		Transport string `json:"transport"`
		Path      string `json:"path"`
	} `json:"config"`
	Status    string            `json:"status"`
	Invalid   bool              `json:"invalid"`
	PathBytes []store.PathBytes `json:"path_bytes"`
	Result    json.RawMessage   `json:"result"` // the roll-ups' figures
	// patterns "mobile_summary"
	Primary    string `json:"primary"`
	Backup     string `json:"backup"`
	Ended      string `json:"ended"`
	Transports []struct {
		Transport string `json:"transport"`
		Index     int64  `json:"index"`
		Status    string `json:"status"`
		Handover  struct {
			Status           string `json:"status"`
			Cause            string `json:"cause"`
			FirstBackupData  int64  `json:"first_backup_data_ns"`
			DurationSent     int64  `json:"duration_sent_ns"`
			DurationReceived int64  `json:"duration_received_ns"`
		} `json:"handover"`
		Upload   mobileDelays `json:"upload_delays"`
		Download mobileDelays `json:"download_delays"`
	} `json:"transports"`
	Ratios []struct {
		Other    string  `json:"other"`
		Upload   float64 `json:"upload"`
		Download float64 `json:"download"`
	} `json:"mptcp_max_delay_ratios"`
}

type mobileDelays struct {
	Count int64 `json:"count"`
	Lost  int64 `json:"lost"`
	P50   int64 `json:"p50_ns"`
	P99   int64 `json:"p99_ns"`
	Max   int64 `json:"max_ns"`
}

func addDerived(sink store.DerivedSink, raw []byte) error {
	var l derivedLine
	if err := json.Unmarshal(raw, &l); err != nil {
		return err
	}
	switch l.Type {
	case "probe":
		return sink.Probe(l.SurveyProbe)
	case "summary":
		for _, c := range l.Cells {
			if err := sink.Cell(store.SurveyCell{ProbePath: c.ProbePath, ResolvePath: c.ResolvePath, Targets: c.Targets,
				Responsive: c.Responsive, Unresponsive: c.Unresponsive, UnresponsivePct: c.UnresponsivePct, RTTP50ms: c.RTT.P50, RTTMeanms: c.RTT.Mean,
				RTTP10ms: c.RTT.P10, RTTP25ms: c.RTT.P25, RTTP75ms: c.RTT.P75, RTTP90ms: c.RTT.P90}); err != nil {
				return err
			}
		}
	case "mobile_summary": // patterns.MobileRecordType
		for _, t := range l.Transports {
			m := store.MobileSummary{Index: t.Index, Transport: t.Transport, Primary: l.Primary, Backup: l.Backup, Ended: l.Ended,
				Status: t.Status, HandoverStatus: t.Handover.Status, Cause: t.Handover.Cause,
				FirstBackupData: t.Handover.FirstBackupData, DurationSent: t.Handover.DurationSent, DurationReceived: t.Handover.DurationReceived,
				Upload: store.Delays(t.Upload), Download: store.Delays(t.Download)}
			for _, r := range l.Ratios {
				if r.Other == t.Transport {
					m.MPTCPRatioUpload, m.MPTCPRatioDownload = r.Upload, r.Download
				}
			}
			if err := sink.Mobile(m); err != nil {
				return err
			}
		}
	case "pattern_test": // patterns.RecordType
		pb := l.PathBytes
		if pb == nil {
			pb = []store.PathBytes{}
		}
		t := store.PatternTest{Index: l.Index, Pattern: l.Config.Pattern, Transport: l.Config.Transport,
			Path: l.Config.Path, Status: l.Status, Invalid: l.Invalid, PathBytes: pb}
		if len(l.Result) > 0 && string(l.Result) != "null" {
			t.Result = &store.TestResult{}
			if err := json.Unmarshal(l.Result, t.Result); err != nil {
				return fmt.Errorf("pattern_test result: %w", err)
			}
		}
		return sink.Test(t)
	}
	return nil
}

// collected is a DerivedSink that keeps the rows (Derive's result).
type collected struct{ d *store.Derived }

func (c collected) Cell(x store.SurveyCell) error   { c.d.Cells = append(c.d.Cells, x); return nil }
func (c collected) Probe(x store.SurveyProbe) error { c.d.Probes = append(c.d.Probes, x); return nil }
func (c collected) Test(x store.PatternTest) error  { c.d.Tests = append(c.d.Tests, x); return nil }
func (c collected) Mobile(x store.MobileSummary) error {
	c.d.Mobile = append(c.d.Mobile, x)
	return nil
}

// Derive reads a stored run (JSON Lines or one document) into its derived
// rows. Records of types the tables do not hold are skipped.
func Derive(r io.Reader, contentType string) (store.Derived, error) {
	var d store.Derived
	err := DeriveTo(collected{&d}, r, contentType)
	return d, err
}

// DeriveTo streams a stored run's derived rows into sink.
func DeriveTo(sink store.DerivedSink, r io.Reader, contentType string) error {
	if contentType == "application/json" {
		return deriveDocument(sink, r)
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), report.MaxLineSize)
	for n := 1; sc.Scan(); n++ {
		if err := addDerived(sink, sc.Bytes()); err != nil {
			return fmt.Errorf("derive: line %d: %w", n, err)
		}
	}
	return sc.Err()
}

// Reindex rebuilds the derived rows of one stored run from its raw file.
func (s *Server) Reindex(ctx context.Context, run store.Run) error {
	if !run.Parsed {
		return nil // a newer schema: nothing this build can derive
	}
	f, err := s.openRaw(ctx, run)
	if err != nil {
		return err
	}
	defer f.Close()
	err = s.cfg.Store.PutDerivedStream(ctx, run.RunID, func(sink store.DerivedSink) error {
		return DeriveTo(sink, f, run.ContentType)
	})
	if err != nil {
		return fmt.Errorf("run %s: %w", run.RunID, err)
	}
	return nil
}

// deriveBatchMax bounds the runs derived in one transaction: the
// deriver's queue drained at once, or a page of the catch-up in chunks.
const deriveBatchMax = 64

// reindexRuns derives runs and returns each one's error (Reindex's). A
// store that batches (store.DerivedBatcher) takes them in one
// transaction, one commit for all; if that fails they are derived one
// at a time, so a run that cannot be derived fails alone.
func (s *Server) reindexRuns(ctx context.Context, runs []store.Run) []error {
	errs := make([]error, len(runs))
	if b, ok := s.cfg.Store.(store.DerivedBatcher); ok && len(runs) > 1 {
		var inline []string
		for _, r := range runs {
			if r.Parsed && r.RawPath == store.RawInline {
				inline = append(inline, r.RunID)
			}
		}
		// At most deriveBatchMax bodies of Config.InlineMax (128 kB) each.
		bodies, err := b.GetRaws(ctx, inline)
		if err != nil {
			bodies = map[string][]byte{} // each run reads its own, and fails alone
		}
		s.prefetchRaw(ctx, runs, bodies)
		batch := make([]store.DerivedRun, 0, len(runs))
		for _, r := range runs {
			if !r.Parsed {
				continue // a newer schema: nothing this build can derive
			}
			batch = append(batch, store.DerivedRun{RunID: r.RunID, Fill: func(sink store.DerivedSink) error {
				if body, ok := bodies[r.RunID]; ok {
					return DeriveTo(sink, bytes.NewReader(body), r.ContentType)
				}
				// Opened only when its turn comes: a batch never holds
				// many objects of the raw store open at once.
				f, err := s.openRaw(ctx, r)
				if err != nil {
					return err
				}
				defer f.Close()
				return DeriveTo(sink, f, r.ContentType)
			}})
		}
		if len(batch) == 0 || b.PutDerivedRuns(ctx, batch) == nil {
			return errs
		}
	}
	for i, r := range runs {
		errs[i] = s.Reindex(ctx, r)
	}
	return errs
}

// prefetchMax is the largest object of the raw store a batch reads ahead
// into memory; larger ones are streamed when their turn comes.
const prefetchMax = 128 << 10

// prefetchers is how many objects a batch reads ahead at once.
const prefetchers = 8

// prefetchRaw reads the batch's small objects of the raw store into bodies,
// a few at once: one at a time, each a round trip to S3, they were most
// of the derive lag with --raw s3:// (BenchmarkIngestRunsPostgresS3). One
// that cannot be read is left to its run, to fail alone.
func (s *Server) prefetchRaw(ctx context.Context, runs []store.Run, bodies map[string][]byte) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, prefetchers)
	for _, r := range runs {
		if !r.Parsed || r.RawPath == store.RawInline || r.Bytes > prefetchMax {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f, err := s.raw.Open(ctx, r.RawPath)
			if err != nil {
				return
			}
			defer f.Close()
			b, err := io.ReadAll(io.LimitReader(f, prefetchMax+1))
			if err != nil || len(b) > prefetchMax {
				return
			}
			mu.Lock()
			bodies[r.RunID] = b
			mu.Unlock()
		})
	}
	wg.Wait()
}

// Quarantine hides a run from every view and export (store.Quarantine)
// and rolls its probe's other runs of that day up again at once, from
// their raw uploads: the fleet views need neither a reindex nor a
// collector restart to leave the run out.
func (s *Server) Quarantine(ctx context.Context, runID, reason string) error {
	if err := s.cfg.Store.Quarantine(ctx, runID, reason, time.Now()); err != nil {
		return err
	}
	if failed := s.catchUp(ctx); failed > 0 {
		return fmt.Errorf("run %s is quarantined, but %d runs were not rolled up again (their raw uploads could not be read): the collector's catch-up or `mptester collect reindex` adds them", runID, failed)
	}
	return nil
}

// ReindexAll rebuilds every run's derived rows and the roll-ups, in
// batches as the deriver does, and returns how many runs it read.
// Interrupted, the runs not yet read are rolled up by the collector's
// catch-up (ListUnderived lists them).
func (s *Server) ReindexAll(ctx context.Context) (int, error) {
	if err := s.cfg.Store.ResetRollups(ctx); err != nil {
		return 0, err
	}
	n := 0
	var after int64
	for {
		page, err := s.cfg.Store.ListRuns(ctx, store.RunFilter{After: after})
		if err != nil {
			return n, err
		}
		if len(page) == 0 {
			return n, nil
		}
		for chunk := range slices.Chunk(page, deriveBatchMax) {
			for _, err := range s.reindexRuns(ctx, chunk) {
				if err != nil {
					return n, err
				}
				n++
			}
		}
		after = page[len(page)-1].Seq
	}
}

// deriver fills the derived tables for new uploads in the background, so
// a receipt never waits for them. Runs it never saw (the queue was full,
// or the collector stopped first) are caught up from the store: at start,
// and whenever the queue has drained after it overflowed. Runs whose
// derivation failed (the store was down) are caught up again after a
// backoff, until none is left: the tables heal without a restart. While
// that backoff runs the stores are checked, and once they were seen down
// and are back the catch-up runs at once: a long outage grows the backoff
// to minutes, which must not delay the healing by as much.
func (s *Server) deriver(ctx context.Context) {
	first := cmp.Or(s.cfg.DeriveRetry, 2*time.Second)
	every := cmp.Or(s.cfg.StoreCheck, time.Second)
	wait := first
	var retry, check <-chan time.Time
	sawDown := false
	again := func(failed int) {
		if failed == 0 {
			wait, retry, check, sawDown = first, nil, nil, false
			return
		}
		if retry == nil {
			retry = time.After(wait)
			wait = min(wait*2, first*64)
		}
		if check == nil {
			check = time.After(every)
		}
	}
	again(s.catchUp(ctx))
	pruned := time.Time{}
	for {
		if time.Since(pruned) > time.Hour { // hour roll-ups are kept for recent runs only
			if err := s.cfg.Store.PruneRollups(ctx, time.Now().Add(-store.HourRetention)); err != nil {
				s.log.Warn("hour roll-ups not pruned", "err", err)
			}
			pruned = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-retry:
			retry = nil
			again(s.catchUp(ctx))
		case <-check:
			check = nil
			up := s.storesUp(ctx)
			switch {
			case !up:
				sawDown = true
			case sawDown:
				// Back after an outage: retry now, with the backoff
				// started over (a failure left with the stores up waits
				// for it as before: no retry loop on a run that cannot
				// be derived).
				s.log.Info("stores are back; deriving the runs that failed")
				sawDown, retry, wait = false, nil, first
				again(s.catchUp(ctx))
				continue
			}
			if retry != nil {
				check = time.After(every)
			}
		case r := <-s.derive:
			// What else is queued goes in the same transaction (never
			// waited for: a lone upload is derived at once).
			runs := []store.Run{r}
		more:
			for len(runs) < deriveBatchMax {
				select {
				case r := <-s.derive:
					runs = append(runs, r)
				default:
					break more
				}
			}
			failed := 0
			for i, err := range s.reindexRuns(ctx, runs) {
				s.backlog.result(runs[i].RunID, err) // before it leaves the queue: never uncounted meanwhile
				s.backlog.unqueue(runs[i].RunID)
				if err != nil {
					s.log.Warn("derived tables not filled; retried", "run_id", runs[i].RunID, "err", err)
					failed++
				}
			}
			if failed > 0 {
				again(failed)
			}
			if len(s.derive) == 0 && s.missed.Swap(false) {
				again(s.catchUp(ctx))
			}
		}
	}
}

// storesUp says whether the index and the raw store answer (as /healthz
// checks them).
func (s *Server) storesUp(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := s.cfg.Store.GetRun(ctx, "-"); err != nil && !errors.Is(err, store.ErrNotFound) {
		return false
	}
	return s.raw.Check(ctx) == nil
}

// deriveBacklog is the metric of the runs waiting for their derived rows.
func (s *Server) deriveBacklog() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mptester_collect_derive_backlog",
		Help: "Stored runs waiting for their derived rows: queued, or failed and retried with backoff."},
		func() float64 { return float64(s.backlog.size()) })
}

// catchUp derives every parsed run that has no derived rows yet and
// returns how many it could not (1 if it could not list them).
func (s *Server) catchUp(ctx context.Context) int {
	n, failed := 0, map[string]struct{}{}
	var after int64
	for ctx.Err() == nil {
		page, err := s.cfg.Store.ListUnderived(ctx, after)
		if err != nil {
			s.log.Warn("derived tables: cannot list the runs to catch up; retried", "err", err)
			return max(len(failed), 1)
		}
		if len(page) == 0 {
			break
		}
		for chunk := range slices.Chunk(page, deriveBatchMax) {
			if ctx.Err() != nil {
				break // stopping: the rest are caught up at the next start
			}
			for i, err := range s.reindexRuns(ctx, chunk) {
				r := chunk[i]
				s.backlog.result(r.RunID, err)
				if err != nil {
					s.log.Warn("derived tables not filled; retried", "run_id", r.RunID, "err", err)
					failed[r.RunID] = struct{}{}
					continue
				}
				n++
			}
		}
		after = page[len(page)-1].Seq
	}
	if ctx.Err() == nil {
		s.backlog.keepFailed(failed)
	}
	if n > 0 {
		s.log.Info("derived tables caught up", "runs", n, "failed", len(failed))
	}
	return len(failed)
}

// deriveDocument streams a stored document's records one at a time (the
// document was validated at upload), so deriving holds no whole document.
func deriveDocument(sink store.DerivedSink, r io.Reader) error {
	dec := json.NewDecoder(bufio.NewReaderSize(r, 64<<10))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("derive: not a JSON object (%v)", err)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return fmt.Errorf("derive: %w", err)
		}
		if k != "records" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return fmt.Errorf("derive: %w", err)
			}
			continue
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('[') {
			return fmt.Errorf("derive: records is not an array (%v)", err)
		}
		for i := 0; dec.More(); i++ {
			var rec json.RawMessage
			if err := dec.Decode(&rec); err != nil {
				return fmt.Errorf("derive: record %d: %w", i, err)
			}
			if err := addDerived(sink, rec); err != nil {
				return fmt.Errorf("derive: record %d: %w", i, err)
			}
		}
		if _, err := dec.Token(); err != nil {
			return fmt.Errorf("derive: %w", err)
		}
	}
	return nil
}
