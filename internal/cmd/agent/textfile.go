package agent

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/internal/fleetfig"
	"github.com/mptester/mptester/internal/fsutil"
	"github.com/mptester/mptester/upload"
)

// TextfileName is the file --textfile writes in node_exporter's textfile
// collector directory (it reads *.prom; the temporary file of the atomic
// write does not end so).
const TextfileName = "mptester.prom"

// textfile keeps the figures of the probe's last survey, pattern run and
// mobile run (in the agent's state directory, so a --once agent that ran
// one task still reports the others) and writes them, with its spool,
// for node_exporter: the collector's /metrics/fleet figures for this
// probe, from the same derivation of the same result files.
type textfile struct {
	dir   string // node_exporter's textfile directory
	state string // the kept figures (JSON)
	probe string
}

type keptFigures struct {
	Survey *fleetfig.Survey `json:"survey,omitempty"`
	Run    *fleetfig.Run    `json:"run,omitempty"`
	Mobile *fleetfig.Mobile `json:"mobile,omitempty"`
}

func (t *textfile) load() keptFigures {
	var k keptFigures
	if b, err := os.ReadFile(t.state); err == nil {
		_ = json.Unmarshal(b, &k) // a damaged copy starts over
	}
	return k
}

// pending names the spool's results now (before a task runs).
func pending(sp *upload.Spool) map[string]bool {
	out := map[string]bool{}
	items, _ := sp.Pending()
	for _, it := range items {
		out[it.Name] = true
	}
	return out
}

// add derives the results spooled since before and keeps the figures of
// the latest of each kind.
func (t *textfile) add(sp *upload.Spool, before map[string]bool) error {
	items, err := sp.Pending()
	if err != nil {
		return err
	}
	k := t.load()
	changed := false
	for _, it := range items {
		if before[it.Name] {
			continue
		}
		f, err := sp.Open(it)
		if err != nil {
			return err
		}
		ok, err := k.derive(f, strings.HasSuffix(it.Name, ".json"))
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", it.Name, err)
		}
		changed = changed || ok
	}
	if !changed {
		return nil
	}
	b, err := json.Marshal(k)
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(t.state, b, 0o600)
}

// resultHeader is what the figures need of a result's header.
type resultHeader struct {
	StartedAt time.Time    `json:"started_at"`
	Paths     []store.Path `json:"paths"`
}

// figureSink takes the derived rows the figures use (not a survey's
// per-target records, which may be millions).
type figureSink struct{ d *store.Derived }

func (s figureSink) Cell(c store.SurveyCell) error  { s.d.Cells = append(s.d.Cells, c); return nil }
func (figureSink) Probe(store.SurveyProbe) error    { return nil }
func (s figureSink) Test(x store.PatternTest) error { s.d.Tests = append(s.d.Tests, x); return nil }
func (s figureSink) Mobile(m store.MobileSummary) error {
	s.d.Mobile = append(s.d.Mobile, m)
	return nil
}

// derive reads one result (a JSON document, or JSON Lines) through the
// collector's derivation and replaces the kept figures it has rows for.
func (k *keptFigures) derive(r io.Reader, document bool) (bool, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var hdr resultHeader
	ct := "application/x-ndjson"
	if document {
		ct = "application/json"
		b, err := io.ReadAll(br)
		if err != nil {
			return false, err
		}
		if err := json.Unmarshal(b, &hdr); err != nil {
			return false, err
		}
		br = bufio.NewReader(bytes.NewReader(b))
	} else {
		line, err := br.Peek(64 << 10)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
			return false, err
		}
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i]
		}
		if err := json.Unmarshal(line, &hdr); err != nil {
			return false, fmt.Errorf("header: %w", err)
		}
	}
	var d store.Derived
	if err := collect.DeriveTo(figureSink{&d}, br, ct); err != nil {
		return false, err
	}
	kinds := map[string]string{}
	for _, p := range hdr.Paths {
		kinds[p.Name] = p.Kind
	}
	changed := false
	if len(d.Cells) > 0 {
		s := &fleetfig.Survey{StartedAt: hdr.StartedAt}
		for _, c := range d.Cells {
			s.Cells = append(s.Cells, fleetfig.Cell{ProbePath: c.ProbePath, ResolvePath: c.ResolvePath,
				Study: fleetfig.Study(kinds, c.ProbePath, c.ResolvePath), Targets: c.Targets, Responsive: c.Responsive,
				RTTMedian: time.Duration(c.RTTP50ms * float64(time.Millisecond)), RTTMean: time.Duration(c.RTTMeanms * float64(time.Millisecond)),
				RTTQuantiles: collect.CellQuantiles(c)})
		}
		if k.Survey == nil || !s.StartedAt.Before(k.Survey.StartedAt) {
			k.Survey, changed = s, true
		}
	}
	if len(d.Tests) > 0 {
		// In the run's test order, as the collector reads them.
		tests := slices.Clone(d.Tests)
		slices.SortStableFunc(tests, func(a, b store.PatternTest) int { return cmp.Compare(a.Index, b.Index) })
		var ft []fleetfig.Test
		for _, t := range tests {
			bulk, up, down := t.Result.Goodputs()
			ft = append(ft, fleetfig.Test{Transport: t.Transport, Pattern: t.Pattern, Status: t.Status, Invalid: t.Invalid,
				Bulk: bulk, Upload: up, Download: down})
		}
		if run := fleetfig.NewRun(hdr.StartedAt, ft); k.Run == nil || !run.StartedAt.Before(k.Run.StartedAt) {
			k.Run, changed = run, true
		}
	}
	if len(d.Mobile) > 0 {
		m := &fleetfig.Mobile{StartedAt: hdr.StartedAt}
		for _, x := range d.Mobile {
			m.Handovers = append(m.Handovers, fleetfig.Handover{Transport: x.Transport,
				MaxUpload: time.Duration(x.Upload.Max), MaxDown: time.Duration(x.Download.Max)})
		}
		if k.Mobile == nil || !m.StartedAt.Before(k.Mobile.StartedAt) {
			k.Mobile, changed = m, true
		}
	}
	return changed, nil
}

// write replaces DIR/mptester.prom: the kept figures, this pass's time as
// last seen, and the spool.
func (t *textfile) write(sp *upload.Spool, now time.Time) error {
	k := t.load()
	p := fleetfig.Probe{Name: t.probe, LastSeen: now, Survey: k.Survey, Run: k.Run, Mobile: k.Mobile}
	if sp != nil {
		items, err := sp.Pending()
		if err != nil {
			return err
		}
		p.Spool = &fleetfig.Spool{Backlog: int64(len(items))}
	}
	var buf bytes.Buffer
	if err := (fleetfig.Figures{Probes: []fleetfig.Probe{p}}).WriteText(&buf, now); err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(filepath.Join(t.dir, TextfileName), buf.Bytes(), 0o644)
}
