package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Derived is what one run contributes to the typed tables.
type Derived struct {
	Cells  []SurveyCell    `json:"cells,omitempty"`
	Probes []SurveyProbe   `json:"probes,omitempty"`
	Tests  []PatternTest   `json:"tests,omitempty"`
	Mobile []MobileSummary `json:"mobile,omitempty"`
}

// SurveyCell is one WW/WL/LW/LL cell of a survey summary (study 004 §III).
type SurveyCell struct {
	ProbePath       string  `json:"probe_path"`
	ResolvePath     string  `json:"resolve_path"`
	Targets         int64   `json:"targets"`
	Responsive      int64   `json:"responsive"`
	Unresponsive    int64   `json:"unresponsive"`
	UnresponsivePct float64 `json:"unresponsive_pct"`
	RTTP50ms        float64 `json:"rtt_p50_ms"`
	RTTMeanms       float64 `json:"rtt_mean_ms"`
	// The other quantiles of the cell's per-target RTTs (the summary's);
	// nil in rows derived before they were stored.
	RTTP10ms *float64 `json:"rtt_p10_ms,omitempty"`
	RTTP25ms *float64 `json:"rtt_p25_ms,omitempty"`
	RTTP75ms *float64 `json:"rtt_p75_ms,omitempty"`
	RTTP90ms *float64 `json:"rtt_p90_ms,omitempty"`
}

// SurveyProbe is one probe record of a survey.
type SurveyProbe struct {
	ProbePath   string `json:"probe_path"`
	ResolvePath string `json:"resolve_path"`
	Address     string `json:"address"`
	Method      string `json:"method"`
	Sent        int64  `json:"sent"`
	Received    int64  `json:"received"`
	Responsive  bool   `json:"responsive"`
	Valid       bool   `json:"valid"`
	// What only the roll-ups keep (not stored per record, not read back):
	// the record's resolve paths (cells), whether the host was
	// overloaded, its RTT samples and median.
	ResolvePaths   []string  `json:"resolve_paths,omitempty"`
	HostOverloaded bool      `json:"host_overloaded,omitempty"`
	RTTsMs         []float64 `json:"rtts_ms,omitempty"`
	Median         float64   `json:"median,omitempty"`
}

// PatternTest is one test of a pattern run with its per-path bytes.
type PatternTest struct {
	Index     int64       `json:"index"`
	Pattern   string      `json:"pattern"`
	Transport string      `json:"transport"`
	Path      string      `json:"path"`
	Status    string      `json:"status"`
	Invalid   bool        `json:"invalid"`
	PathBytes []PathBytes `json:"path_bytes"`
	// Result is what only the roll-ups keep (not read back).
	Result *TestResult `json:"-"`
}

// TestResult is the part of a pattern test's result the roll-ups sketch
// (the record's field names: patterns/test.go).
type TestResult struct {
	Delays     []int64        `json:"delays_ns"`     // ping
	Completion *int64         `json:"completion_ns"` // bulk
	Goodput    *float64       `json:"goodput_bps"`   // bulk
	Upload     *TestDirection `json:"upload"`        // iperf, interactive
	Download   *TestDirection `json:"download"`
}

// Goodputs are the test's goodput in bit/s: a bulk test's, and an iperf
// or interactive test's per direction; nil where the record has none.
// They are stored whatever the status: readers keep successful tests.
func (r *TestResult) Goodputs() (bulk, upload, download *float64) {
	if r == nil {
		return nil, nil, nil
	}
	bulk = r.Goodput
	if r.Upload != nil {
		upload = r.Upload.GoodputBps
	}
	if r.Download != nil {
		download = r.Download.GoodputBps
	}
	return bulk, upload, download
}

// TestDirection is one direction of an iperf or interactive test.
type TestDirection struct {
	GoodputBps *float64 `json:"goodput_bps"`
	Delays     []int64  `json:"delays_ns"`
	Max        *int64   `json:"max_ns"`
}

// PathBytes are one path's interface counters over a test.
type PathBytes struct {
	Path     string `json:"path"`
	Sent     int64  `json:"bytes_sent"`
	Received int64  `json:"bytes_received"`
}

// MobileSummary is one handover transport's part of a mobile-mode run's
// summary record; times are nanoseconds since the transport started.
type MobileSummary struct {
	Index              int64   `json:"index"`
	Transport          string  `json:"transport"`
	Primary            string  `json:"primary"`
	Backup             string  `json:"backup"`
	Ended              string  `json:"ended"`
	Status             string  `json:"status"`
	HandoverStatus     string  `json:"handover_status"`
	Cause              string  `json:"cause"`
	FirstBackupData    int64   `json:"first_backup_data_ns"`
	DurationSent       int64   `json:"duration_sent_ns"`
	DurationReceived   int64   `json:"duration_received_ns"`
	Upload             Delays  `json:"upload"`
	Download           Delays  `json:"download"`
	MPTCPRatioUpload   float64 `json:"mptcp_ratio_upload"`
	MPTCPRatioDownload float64 `json:"mptcp_ratio_download"`
}

// Delays summarise one direction's chunk delays, in nanoseconds.
type Delays struct {
	Count int64 `json:"count"`
	Lost  int64 `json:"lost"`
	P50   int64 `json:"p50_ns"`
	P99   int64 `json:"p99_ns"`
	Max   int64 `json:"max_ns"`
}

var derivedTables = []string{"survey_cells", "survey_probes", "pattern_path_bytes", "pattern_tests", "mobile_summaries"}

// qClearDerivedPG deletes the rows of a batch of runs ($1, in run_id
// order) from every derived table, marks them derived and returns each
// one's roll-up state and run fields, in one PostgreSQL statement.
var qClearDerivedPG = func() string {
	var b strings.Builder
	b.WriteString("WITH ")
	for i, t := range derivedTables {
		fmt.Fprintf(&b, "d%d AS (DELETE FROM %s WHERE run_id = ANY($1)), ", i, t)
	}
	b.WriteString(`m AS (INSERT INTO derived_runs (run_id, derived_at) SELECT id, $2 FROM unnest($1::text[]) AS u(id)
		ON CONFLICT (run_id) DO UPDATE SET derived_at = excluded.derived_at RETURNING run_id, rolled_up)
		SELECT m.run_id, m.rolled_up, r.probe_id, r.command, r.status, r.started_at FROM m JOIN runs r USING (run_id)`)
	return b.String()
}()

// DerivedSink takes a run's derived rows one at a time, so a survey's
// hundreds of thousands of probe records never sit in memory together.
type DerivedSink interface {
	Cell(SurveyCell) error
	Probe(SurveyProbe) error
	Test(PatternTest) error
	Mobile(MobileSummary) error
}

// Fill returns d's rows as a fill function for PutDerivedStream.
func (d Derived) Fill(sink DerivedSink) error {
	for _, c := range d.Cells {
		if err := sink.Cell(c); err != nil {
			return err
		}
	}
	for _, p := range d.Probes {
		if err := sink.Probe(p); err != nil {
			return err
		}
	}
	for _, t := range d.Tests {
		if err := sink.Test(t); err != nil {
			return err
		}
	}
	for _, m := range d.Mobile {
		if err := sink.Mobile(m); err != nil {
			return err
		}
	}
	return nil
}

// PutDerived replaces runID's rows in the derived tables.
func (s *sqlStore) PutDerived(ctx context.Context, runID string, d Derived) error {
	return s.PutDerivedStream(ctx, runID, d.Fill)
}

// PutDerivedStream replaces runID's rows in the derived tables with what
// fill gives its sink, in one transaction.
func (s *sqlStore) PutDerivedStream(ctx context.Context, runID string, fill func(DerivedSink) error) error {
	return s.PutDerivedRuns(ctx, []DerivedRun{{RunID: runID, Fill: fill}})
}

// DerivedRun is one run's derived rows for PutDerivedRuns: fill gives
// them to its sink, as for PutDerivedStream.
type DerivedRun struct {
	RunID string
	Fill  func(DerivedSink) error
}

// DerivedBatcher is a store that derives several runs in one transaction.
// The deriver uses it when the store has it (test wrappers of Store do
// not, and get PutDerivedStream per run).
type DerivedBatcher interface {
	PutDerivedRuns(ctx context.Context, runs []DerivedRun) error
	// GetRaws returns the inline bodies of the runs that have one (a
	// batch's raw reads in one query, not one each).
	GetRaws(ctx context.Context, runIDs []string) (map[string][]byte, error)
}

// GetRaws reads the inline bodies of runIDs: one statement on PostgreSQL,
// GetRaw each on SQLite (in process: no round trips to save).
func (s *sqlStore) GetRaws(ctx context.Context, runIDs []string) (map[string][]byte, error) {
	out := make(map[string][]byte, len(runIDs))
	if s.d != postgresDialect {
		for _, id := range runIDs {
			b, err := s.GetRaw(ctx, id)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out[id] = b
		}
		return out, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT run_id, body FROM raw_inline WHERE run_id = ANY($1)`, runIDs)
	if err != nil {
		return nil, fmt.Errorf("get raw bodies: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var b []byte
		if err := rows.Scan(&id, &b); err != nil {
			return nil, fmt.Errorf("get raw bodies: %w", err)
		}
		out[id] = b
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("get raw bodies: %w", err)
	}
	return out, nil
}

// PutDerivedRuns is PutDerivedStream for several runs in one transaction:
// one commit (one WAL flush on PostgreSQL) and one read-modify-write of
// each roll-up row the runs share, not one per run. The deriver's
// per-run transactions were most of PostgreSQL's CPU per upload
// (docs/benchmarks.md, "The deriver in batches"). Runs are taken in run_id order, so batches of
// two replicas lock derived_runs rows in one order. Any run's failure
// fails them all; the caller retries them one at a time.
func (s *sqlStore) PutDerivedRuns(ctx context.Context, runs []DerivedRun) error {
	runs = slices.Clone(runs)
	slices.SortStableFunc(runs, func(a, b DerivedRun) int { return strings.Compare(a.RunID, b.RunID) })
	// A run queued twice (an upload and a catch-up) is derived once: twice
	// in one transaction, it would be rolled up twice.
	runs = slices.CompactFunc(runs, func(a, b DerivedRun) bool { return a.RunID == b.RunID })
	return s.inTx(ctx, func(tx *sql.Tx) error {
		k := &derivedTx{ctx: ctx}
		if s.d == postgresDialect {
			k.pgTx = tx
		}
		// One statement each for the whole transaction: tx.StmtContext per
		// row would keep a statement per row until the commit.
		q := s.wq.in(tx)
		for _, p := range []struct {
			st    **sql.Stmt
			query string
		}{{&k.cell, qInsertCell}, {&k.probe, qInsertProbe}, {&k.test, qInsertTest}, {&k.pathBytes, qInsertPathBytes}, {&k.mobile, qInsertMobile}} {
			st, err := q.stmt(ctx, s.q(p.query))
			if err != nil {
				return err
			}
			*p.st = st
		}
		heads, err := s.clearDerived(ctx, tx, runs)
		if err != nil {
			return err
		}
		var rolls []Rollup
		var rolled []string
		for i, r := range runs {
			acc, err := s.deriveRun(k, r, heads[i])
			if err != nil {
				return err
			}
			if acc != nil {
				rolls = append(rolls, acc.rows()...)
				rolled = append(rolled, r.RunID)
			}
		}
		if len(rolled) == 0 {
			return nil
		}
		if err := s.mergeRollups(ctx, tx, foldRollups(rolls)); err != nil {
			return err
		}
		if s.d == postgresDialect {
			if _, err := tx.ExecContext(ctx, `UPDATE derived_runs SET rolled_up = TRUE WHERE run_id = ANY($1)`, rolled); err != nil {
				return fmt.Errorf("mark rolled up: %w", err)
			}
			return nil
		}
		for _, id := range rolled {
			if _, err := tx.ExecContext(ctx, s.q(`UPDATE derived_runs SET rolled_up = TRUE WHERE run_id = ?`), id); err != nil {
				return fmt.Errorf("mark rolled up: %w", err)
			}
		}
		return nil
	})
}

// derivedHead is what deriving a run needs besides its rows: whether it
// is rolled up already and the run fields its roll-up rows are keyed by.
type derivedHead struct {
	rolledUp               bool
	probe, command, status string
	started                int64
}

// clearDerived deletes the runs' derived rows, marks them derived and
// returns their heads, in runs' order.
func (s *sqlStore) clearDerived(ctx context.Context, tx *sql.Tx, runs []DerivedRun) ([]derivedHead, error) {
	heads := make([]derivedHead, len(runs))
	if s.d == postgresDialect {
		// One statement for the batch, not six round trips a run (the
		// deriver runs for every upload, on the cores the uploads need).
		ids := make([]string, len(runs))
		at := make(map[string]int, len(runs))
		for i, r := range runs {
			ids[i], at[r.RunID] = r.RunID, i
		}
		rows, err := tx.QueryContext(ctx, qClearDerivedPG, ids, time.Now().UnixNano())
		if err != nil {
			return nil, fmt.Errorf("clear derived rows: %w", err)
		}
		defer rows.Close()
		seen := 0
		for rows.Next() {
			var id string
			var h derivedHead
			if err := rows.Scan(&id, &h.rolledUp, &h.probe, &h.command, &h.status, &h.started); err != nil {
				return nil, fmt.Errorf("clear derived rows: %w", err)
			}
			heads[at[id]] = h
			seen++
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("clear derived rows: %w", err)
		}
		if seen != len(runs) {
			return nil, fmt.Errorf("clear derived rows: %d of %d runs found", seen, len(runs))
		}
		return heads, nil
	}
	for i, r := range runs {
		h := &heads[i]
		for _, t := range derivedTables {
			if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM `+t+` WHERE run_id = ?`), r.RunID); err != nil {
				return nil, fmt.Errorf("run %s: clear %s: %w", r.RunID, t, err)
			}
		}
		if err := tx.QueryRowContext(ctx, s.q(`INSERT INTO derived_runs (run_id, derived_at) VALUES (?, ?)
			ON CONFLICT (run_id) DO UPDATE SET derived_at = excluded.derived_at RETURNING rolled_up`), r.RunID, time.Now().UnixNano()).Scan(&h.rolledUp); err != nil {
			return nil, fmt.Errorf("run %s: mark derived: %w", r.RunID, err)
		}
		if err := tx.QueryRowContext(ctx, s.q(`SELECT probe_id, command, status, started_at FROM runs WHERE run_id = ?`), r.RunID).Scan(&h.probe, &h.command, &h.status, &h.started); err != nil {
			return nil, fmt.Errorf("run %s: %w", r.RunID, err)
		}
	}
	return heads, nil
}

// deriveRun writes one run's derived rows inside PutDerivedRuns's
// transaction and returns its roll-up rows, nil if the run was rolled up
// already (a run derived again by reindex adds nothing until ResetRollups
// has emptied the roll-ups).
func (s *sqlStore) deriveRun(k *derivedTx, r DerivedRun, h derivedHead) (*rollupAcc, error) {
	k.runID, k.probes, k.roll = r.RunID, 0, nil
	if !h.rolledUp {
		st := fromNanos(h.started)
		k.roll = newRollupAcc(h.probe, h.command, h.status, st, time.Since(st) < HourRetention)
	}
	if err := r.Fill(k); err != nil {
		return nil, err
	}
	if err := k.flushProbes(); err != nil {
		return nil, err
	}
	return k.roll, nil
}

// foldRollups sorts rows by key and adds up those of one key (runs of a
// batch share their probe's day and hour rows), so each is written once.
// A folded row is a new one: a run's day and hour rows share their
// sketches, which must not be added to.
func foldRollups(rows []Rollup) []Rollup {
	slices.SortStableFunc(rows, func(x, y Rollup) int { return x.compare(y.RollupKey) })
	var out []Rollup
	for i := 0; i < len(rows); {
		j := i + 1
		for j < len(rows) && rows[j].compare(rows[i].RollupKey) == 0 {
			j++
		}
		if j == i+1 {
			out = append(out, rows[i])
		} else {
			sum := Rollup{RollupKey: rows[i].RollupKey}
			for _, r := range rows[i:j] {
				sum.Merge(&r)
			}
			out = append(out, sum)
		}
		i = j
	}
	return out
}

// probeChunk is how many survey probe records go in one PostgreSQL
// statement (as arrays): a survey has thousands, and a round trip each
// was most of PostgreSQL's CPU per survey upload.
const probeChunk = 1000

// qInsertProbesPG inserts a chunk of one run's probe records ($1) from
// arrays, one per column.
const qInsertProbesPG = `INSERT INTO survey_probes (run_id, seq, probe_path, resolve_path, address, method, sent, received,
	responsive, valid) SELECT $1, * FROM unnest($2::int8[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int8[],
	$8::int8[], $9::bool[], $10::bool[])`

// probeRows are buffered probe records, a column each.
type probeRows struct {
	seq, sent, received                     []int64
	probePath, resolvePath, address, method []string
	responsive, valid                       []bool
}

// flushProbes inserts the buffered probe records of the current run.
func (k *derivedTx) flushProbes() error {
	b := &k.pb
	if len(b.seq) == 0 {
		return nil
	}
	if _, err := k.pgTx.ExecContext(k.ctx, qInsertProbesPG, k.runID, b.seq, b.probePath, b.resolvePath, b.address, b.method,
		b.sent, b.received, b.responsive, b.valid); err != nil {
		return fmt.Errorf("insert probe records: %w", err)
	}
	*b = probeRows{seq: b.seq[:0], sent: b.sent[:0], received: b.received[:0], probePath: b.probePath[:0], resolvePath: b.resolvePath[:0],
		address: b.address[:0], method: b.method[:0], responsive: b.responsive[:0], valid: b.valid[:0]}
	return nil
}

// derivedTx inserts derived rows inside PutDerivedStream's transaction.
type derivedTx struct {
	// pgTx is the transaction on PostgreSQL, where probe records are
	// buffered (pb) and inserted in chunks; nil on SQLite (in process:
	// a statement per row costs no round trip).
	pgTx *sql.Tx
	pb   probeRows

	ctx                                  context.Context
	runID                                string
	cell, probe, test, pathBytes, mobile *sql.Stmt
	probes                               int64
	roll                                 *rollupAcc // nil: the run is rolled up already
}

func (k *derivedTx) Cell(c SurveyCell) error {
	if _, err := k.cell.ExecContext(k.ctx, k.runID, c.ProbePath, c.ResolvePath, c.Targets, c.Responsive,
		c.Unresponsive, c.UnresponsivePct, c.RTTP50ms, c.RTTMeanms, c.RTTP10ms, c.RTTP25ms, c.RTTP75ms, c.RTTP90ms); err != nil {
		return fmt.Errorf("insert cell: %w", err)
	}
	return nil
}

func (k *derivedTx) Probe(p SurveyProbe) error {
	if k.pgTx != nil {
		b := &k.pb
		b.seq, b.probePath, b.resolvePath = append(b.seq, k.probes), append(b.probePath, p.ProbePath), append(b.resolvePath, p.ResolvePath)
		b.address, b.method, b.sent = append(b.address, p.Address), append(b.method, p.Method), append(b.sent, p.Sent)
		b.received, b.responsive, b.valid = append(b.received, p.Received), append(b.responsive, p.Responsive), append(b.valid, p.Valid)
		if len(b.seq) >= probeChunk {
			if err := k.flushProbes(); err != nil {
				return err
			}
		}
	} else if _, err := k.probe.ExecContext(k.ctx, k.runID, k.probes, p.ProbePath, p.ResolvePath, p.Address,
		p.Method, p.Sent, p.Received, p.Responsive, p.Valid); err != nil {
		return fmt.Errorf("insert probe record: %w", err)
	}
	k.probes++
	if k.roll != nil {
		k.roll.probe(p)
	}
	return nil
}

func (k *derivedTx) Test(t PatternTest) error {
	good, up, down := t.Result.Goodputs()
	if _, err := k.test.ExecContext(k.ctx, k.runID, t.Index, t.Pattern, t.Transport, t.Path, t.Status, t.Invalid, good, up, down); err != nil {
		return fmt.Errorf("insert test: %w", err)
	}
	for _, b := range t.PathBytes {
		if _, err := k.pathBytes.ExecContext(k.ctx, k.runID, t.Index, b.Path, b.Sent, b.Received); err != nil {
			return fmt.Errorf("insert path bytes: %w", err)
		}
	}
	if k.roll != nil {
		k.roll.test(t)
	}
	return nil
}

func (k *derivedTx) Mobile(m MobileSummary) error {
	if _, err := k.mobile.ExecContext(k.ctx, k.runID, m.Index, m.Transport, m.Primary, m.Backup, m.Ended, m.Status,
		m.HandoverStatus, m.Cause, m.FirstBackupData, m.DurationSent, m.DurationReceived,
		m.Upload.Count, m.Upload.Lost, m.Upload.P50, m.Upload.P99, m.Upload.Max,
		m.Download.Count, m.Download.Lost, m.Download.P50, m.Download.P99, m.Download.Max,
		m.MPTCPRatioUpload, m.MPTCPRatioDownload); err != nil {
		return fmt.Errorf("insert mobile summary: %w", err)
	}
	return nil
}

const (
	qInsertMobile = `INSERT INTO mobile_summaries (run_id, idx, transport, primary_path, backup_path, ended, status,
		handover_status, cause, first_backup_data_ns, duration_sent_ns, duration_received_ns,
		upload_count, upload_lost, upload_p50_ns, upload_p99_ns, upload_max_ns,
		download_count, download_lost, download_p50_ns, download_p99_ns, download_max_ns,
		mptcp_ratio_upload, mptcp_ratio_download) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING`
	qInsertCell = `INSERT INTO survey_cells (run_id, probe_path, resolve_path, targets, responsive, unresponsive,
		unresponsive_pct, rtt_p50_ms, rtt_mean_ms, rtt_p10_ms, rtt_p25_ms, rtt_p75_ms, rtt_p90_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qInsertProbe = `INSERT INTO survey_probes (run_id, seq, probe_path, resolve_path, address, method, sent, received,
		responsive, valid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qInsertTest = `INSERT INTO pattern_tests (run_id, idx, pattern, transport, path, status, invalid,
		goodput_bps, upload_goodput_bps, download_goodput_bps) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qInsertPathBytes = `INSERT INTO pattern_path_bytes (run_id, idx, path, bytes_sent, bytes_received)
		VALUES (?, ?, ?, ?, ?)`
)

// ListUnderived returns parsed runs after seq `after` (in seq order, at
// most MaxPage) whose derived rows were never written, or not added to
// the roll-ups (after ResetRollups, or from before the roll-ups).
func (s *sqlStore) ListUnderived(ctx context.Context, after int64) ([]Run, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+runColumns+` FROM runs WHERE seq > ? AND parsed AND `+notQuarantined("runs")+`
		AND NOT EXISTS (SELECT 1 FROM derived_runs d WHERE d.run_id = runs.run_id AND d.rolled_up) ORDER BY seq LIMIT ?`), after, MaxPage)
	if err != nil {
		return nil, fmt.Errorf("list underived runs: %w", err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// GetDerived reads runID's rows back, in their order.
func (s *sqlStore) GetDerived(ctx context.Context, runID string) (Derived, error) {
	var d Derived
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT probe_path, resolve_path, targets, responsive, unresponsive, unresponsive_pct,
		rtt_p50_ms, rtt_mean_ms, rtt_p10_ms, rtt_p25_ms, rtt_p75_ms, rtt_p90_ms FROM survey_cells WHERE run_id = ? ORDER BY probe_path, resolve_path`), runID)
	if err != nil {
		return d, err
	}
	for rows.Next() {
		var c SurveyCell
		if err := rows.Scan(&c.ProbePath, &c.ResolvePath, &c.Targets, &c.Responsive, &c.Unresponsive, &c.UnresponsivePct, &c.RTTP50ms, &c.RTTMeanms,
			&c.RTTP10ms, &c.RTTP25ms, &c.RTTP75ms, &c.RTTP90ms); err != nil {
			rows.Close()
			return d, err
		}
		d.Cells = append(d.Cells, c)
	}
	rows.Close()
	rows, err = s.db.QueryContext(ctx, s.q(`SELECT probe_path, resolve_path, address, method, sent, received, responsive, valid
		FROM survey_probes WHERE run_id = ? ORDER BY seq`), runID)
	if err != nil {
		return d, err
	}
	for rows.Next() {
		var p SurveyProbe
		if err := rows.Scan(&p.ProbePath, &p.ResolvePath, &p.Address, &p.Method, &p.Sent, &p.Received, &p.Responsive, &p.Valid); err != nil {
			rows.Close()
			return d, err
		}
		d.Probes = append(d.Probes, p)
	}
	rows.Close()
	rows, err = s.db.QueryContext(ctx, s.q(`SELECT idx, pattern, transport, path, status, invalid FROM pattern_tests WHERE run_id = ? ORDER BY idx`), runID)
	if err != nil {
		return d, err
	}
	for rows.Next() {
		var t PatternTest
		if err := rows.Scan(&t.Index, &t.Pattern, &t.Transport, &t.Path, &t.Status, &t.Invalid); err != nil {
			rows.Close()
			return d, err
		}
		d.Tests = append(d.Tests, t)
	}
	rows.Close()
	rows, err = s.db.QueryContext(ctx, s.q(`SELECT idx, transport, primary_path, backup_path, ended, status, handover_status,
		cause, first_backup_data_ns, duration_sent_ns, duration_received_ns, upload_count, upload_lost, upload_p50_ns,
		upload_p99_ns, upload_max_ns, download_count, download_lost, download_p50_ns, download_p99_ns, download_max_ns,
		mptcp_ratio_upload, mptcp_ratio_download FROM mobile_summaries WHERE run_id = ? ORDER BY idx, transport`), runID)
	if err != nil {
		return d, err
	}
	for rows.Next() {
		var m MobileSummary
		if err := rows.Scan(&m.Index, &m.Transport, &m.Primary, &m.Backup, &m.Ended, &m.Status, &m.HandoverStatus,
			&m.Cause, &m.FirstBackupData, &m.DurationSent, &m.DurationReceived, &m.Upload.Count, &m.Upload.Lost,
			&m.Upload.P50, &m.Upload.P99, &m.Upload.Max, &m.Download.Count, &m.Download.Lost, &m.Download.P50,
			&m.Download.P99, &m.Download.Max, &m.MPTCPRatioUpload, &m.MPTCPRatioDownload); err != nil {
			rows.Close()
			return d, err
		}
		d.Mobile = append(d.Mobile, m)
	}
	rows.Close()
	for i := range d.Tests {
		rows, err := s.db.QueryContext(ctx, s.q(`SELECT path, bytes_sent, bytes_received FROM pattern_path_bytes WHERE run_id = ? AND idx = ? ORDER BY path`), runID, d.Tests[i].Index)
		if err != nil {
			return d, err
		}
		d.Tests[i].PathBytes = []PathBytes{}
		for rows.Next() {
			var b PathBytes
			if err := rows.Scan(&b.Path, &b.Sent, &b.Received); err != nil {
				rows.Close()
				return d, err
			}
			d.Tests[i].PathBytes = append(d.Tests[i].PathBytes, b)
		}
		rows.Close()
	}
	return d, nil
}

// Stored is d as GetDerived reads it back: without the fields only the
// roll-ups keep.
func (d Derived) Stored() Derived {
	out := d
	out.Probes = slices.Clone(d.Probes)
	for i := range out.Probes {
		p := &out.Probes[i]
		p.ResolvePaths, p.HostOverloaded, p.RTTsMs, p.Median = nil, false, nil, 0
	}
	out.Tests = slices.Clone(d.Tests)
	for i := range out.Tests {
		out.Tests[i].Result = nil
	}
	return out
}
