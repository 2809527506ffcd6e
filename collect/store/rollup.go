package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Roll-ups: what the fleet views read instead of the raw uploads. Each
// derived run adds its tests to one row per probe, UTC day (and UTC hour
// while the run is recent: HourRetention), command, cell or path,
// transport and pattern: counts, and sketches of its figures. A row only
// ever grows, in the transaction that writes the run's derived rows, once
// per run (derived_runs.rolled_up); `collect reindex` empties the roll-ups
// and rebuilds them (ResetRollups), so a changed definition needs no
// re-upload.

// Roll-up bucket widths.
const (
	Day  = 24 * time.Hour
	Hour = time.Hour
)

// HourRetention: runs that started this recently also get hour rows;
// PruneRollups removes hour rows older than it.
const HourRetention = 48 * time.Hour

// Sketched figures (units in the name), per test (success only, as the
// report's pattern section): ping RTTs; bulk completion and goodput;
// iperf goodput and interactive chunk delays and max delay per direction;
// a survey target's RTT (the median of its samples).
const (
	MetricRTT          = "rtt_ms"
	MetricCompletion   = "completion_ms"
	MetricGoodput      = "goodput_mbps"
	MetricUpGoodput    = "up_goodput_mbps"
	MetricDownGoodput  = "down_goodput_mbps"
	MetricUpDelay      = "up_delay_ms"
	MetricDownDelay    = "down_delay_ms"
	MetricUpMaxDelay   = "up_max_delay_ms"
	MetricDownMaxDelay = "down_max_delay_ms"
)

// RunCell is the Cell of a run row: every derived run adds one (Runs 1,
// Tests and OK its totals as the report's fleet section counts them, a
// survey's targets once whatever their cells), with its trailer status
// as Pattern and Transport empty, so the fleet views count runs by
// status without the index.
const RunCell = "*run"

// RollupKey names one roll-up row. A survey's rows are per cell (Cell is
// "probe_path/resolve_path", Transport and Pattern empty); a pattern
// run's per test path, transport and pattern; and a run row (RunCell).
type RollupKey struct {
	Probe     string        `json:"probe"`
	Width     time.Duration `json:"width"`
	Bucket    time.Time     `json:"bucket"`
	Command   string        `json:"command"`
	Cell      string        `json:"cell"`
	Transport string        `json:"transport"`
	Pattern   string        `json:"pattern"`
}

func (k RollupKey) compare(o RollupKey) int {
	return cmp.Or(cmp.Compare(k.Width, o.Width), k.Bucket.Compare(o.Bucket), cmp.Compare(k.Probe, o.Probe),
		cmp.Compare(k.Command, o.Command), cmp.Compare(k.Cell, o.Cell), cmp.Compare(k.Transport, o.Transport),
		cmp.Compare(k.Pattern, o.Pattern))
}

// Rollup is one row: Runs that contributed, Tests (pattern tests, or
// survey targets that were valid and not host-overloaded), OK (tests that
// succeeded, targets that answered), Invalid (tests marked invalid), and
// a sketch per figure.
type Rollup struct {
	RollupKey
	Runs     int64              `json:"runs"`
	Tests    int64              `json:"tests"`
	OK       int64              `json:"ok"`
	Invalid  int64              `json:"invalid"`
	Sketches map[string]*Sketch `json:"-"`
}

// Merge adds o's counts and sketches to r (the key is r's).
func (r *Rollup) Merge(o *Rollup) {
	r.Runs += o.Runs
	r.Tests += o.Tests
	r.OK += o.OK
	r.Invalid += o.Invalid
	for m, s := range o.Sketches {
		r.Sketch(m).Merge(s)
	}
}

// Sketch is r's sketch of metric, created empty when missing.
func (r *Rollup) Sketch(metric string) *Sketch {
	if r.Sketches == nil {
		r.Sketches = map[string]*Sketch{}
	}
	s := r.Sketches[metric]
	if s == nil {
		s = &Sketch{}
		r.Sketches[metric] = s
	}
	return s
}

func encodeSketches(m map[string]*Sketch) []byte {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	b := []byte{}
	for _, n := range names {
		b = binary.AppendUvarint(b, uint64(len(n)))
		b = append(b, n...)
		b = m[n].encode(b)
	}
	return b
}

func decodeSketches(b []byte) (map[string]*Sketch, error) {
	if len(b) == 0 {
		return nil, nil
	}
	m := map[string]*Sketch{}
	for len(b) > 0 {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return nil, errSketch
		}
		name := string(b[n : n+int(l)])
		s, rest, err := decodeSketch(b[n+int(l):])
		if err != nil {
			return nil, err
		}
		m[name], b = s, rest
	}
	return m, nil
}

// RollupsOf are the roll-up rows one run adds: the run's probe, command,
// status and start, and its derived rows with the figures they carry (a survey's
// probe records, a pattern run's tests). recent says whether hour rows
// are kept too. The store computes them as rows are written; this is the
// same computation for callers that rebuild them (benchmarks, tests).
func RollupsOf(probe, command, status string, started time.Time, recent bool, d Derived) []Rollup {
	a := newRollupAcc(probe, command, status, started, recent)
	for _, p := range d.Probes {
		a.probe(p)
	}
	for _, t := range d.Tests {
		a.test(t)
	}
	return a.rows()
}

// rollupAcc adds one run's rows up by key.
type rollupAcc struct {
	probeID, command string
	started          time.Time
	recent           bool
	by               map[[3]string]*Rollup
	run              *Rollup
}

func newRollupAcc(probe, command, status string, started time.Time, recent bool) *rollupAcc {
	a := &rollupAcc{probeID: probe, command: command, started: started.UTC(), recent: recent, by: map[[3]string]*Rollup{}}
	a.run = a.get(RunCell, "", status)
	return a
}

func (a *rollupAcc) get(cell, transport, pattern string) *Rollup {
	k := [3]string{cell, transport, pattern}
	r := a.by[k]
	if r == nil {
		r = &Rollup{RollupKey: RollupKey{Probe: a.probeID, Command: a.command, Cell: cell, Transport: transport, Pattern: pattern}, Runs: 1}
		a.by[k] = r
	}
	return r
}

// probe adds a survey target as the report's fleet section counts it:
// valid and not host-overloaded targets, per cell of each resolve path.
func (a *rollupAcc) probe(p SurveyProbe) {
	if !p.Valid || p.HostOverloaded {
		return
	}
	a.run.Tests++
	if p.Responsive {
		a.run.OK++
	}
	rps := p.ResolvePaths
	if len(rps) == 0 && p.ResolvePath != "" {
		rps = []string{p.ResolvePath}
	}
	for _, rp := range rps {
		r := a.get(p.ProbePath+"/"+rp, "", "")
		r.Tests++
		if p.Responsive {
			r.OK++
			r.Sketch(MetricRTT).Add(p.targetRTT())
		}
	}
}

// targetRTT is a target's RTT: the median of its samples, or the
// record's median without samples (the report's definition).
func (p SurveyProbe) targetRTT() float64 {
	if len(p.RTTsMs) == 0 {
		return p.Median
	}
	s := slices.Clone(p.RTTsMs)
	sort.Float64s(s)
	pos := 0.5 * float64(len(s)-1)
	lo := int(pos)
	if lo >= len(s)-1 {
		return s[len(s)-1]
	}
	return s[lo] + (pos-float64(lo))*(s[lo+1]-s[lo])
}

func (a *rollupAcc) test(t PatternTest) {
	r := a.get(t.Path, t.Transport, t.Pattern)
	r.Tests++
	a.run.Tests++
	if t.Invalid {
		r.Invalid++
		a.run.Invalid++
	}
	if t.Status != "success" {
		return
	}
	r.OK++
	a.run.OK++
	res := t.Result
	if res == nil {
		return
	}
	for _, d := range res.Delays {
		r.Sketch(MetricRTT).Add(float64(d) / 1e6)
	}
	if res.Completion != nil {
		r.Sketch(MetricCompletion).Add(float64(*res.Completion) / 1e6)
	}
	if res.Goodput != nil {
		r.Sketch(MetricGoodput).Add(*res.Goodput / 1e6)
	}
	for _, d := range []struct {
		dir                   *TestDirection
		goodput, delay, maxDl string
	}{{res.Upload, MetricUpGoodput, MetricUpDelay, MetricUpMaxDelay}, {res.Download, MetricDownGoodput, MetricDownDelay, MetricDownMaxDelay}} {
		if d.dir == nil {
			continue
		}
		if d.dir.GoodputBps != nil {
			r.Sketch(d.goodput).Add(*d.dir.GoodputBps / 1e6)
		}
		for _, v := range d.dir.Delays {
			r.Sketch(d.delay).Add(float64(v) / 1e6)
		}
		if d.dir.Max != nil {
			r.Sketch(d.maxDl).Add(float64(*d.dir.Max) / 1e6)
		}
	}
}

// rows are the run's roll-up rows, day rows (and hour rows) in key order.
func (a *rollupAcc) rows() []Rollup {
	var out []Rollup
	widths := []time.Duration{Day}
	if a.recent {
		widths = append(widths, Hour)
	}
	for _, w := range widths {
		for _, r := range a.by {
			c := *r
			c.Width, c.Bucket = w, a.started.Truncate(w)
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(x, y Rollup) int { return x.compare(y.RollupKey) })
	return out
}

const (
	rollupCols = `width, bucket, probe, command, cell, transport, pattern`
	rollupKeyW = `width = ? AND bucket = ? AND probe = ? AND command = ? AND cell = ? AND transport = ? AND pattern = ?`
	qRollupIns = `INSERT INTO rollups (` + rollupCols + `, runs, tests, ok, invalid, sketches)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING runs`
	qRollupUpd = `UPDATE rollups SET runs = ?, tests = ?, ok = ?, invalid = ?, sketches = ? WHERE ` + rollupKeyW
)

// qRollupSel reads a roll-up row for update: locked on PostgreSQL, where
// replicas derive at once (SQLite has one writer).
func (s *sqlStore) qRollupSel() string {
	q := `SELECT runs, tests, ok, invalid, sketches FROM rollups WHERE ` + rollupKeyW
	if s.d == postgresDialect {
		q += " FOR UPDATE"
	}
	return q
}

// mergeRollups adds rows to the stored roll-ups inside tx: a row not yet
// stored is inserted; one stored is read (qRollupSel) and written back
// merged. Rows are taken in key order so two transactions lock in the
// same order.
func (s *sqlStore) mergeRollups(ctx context.Context, tx *sql.Tx, rows []Rollup) error {
	if len(rows) == 0 {
		return nil
	}
	q := s.wq.in(tx)
	ins, err := q.stmt(ctx, s.q(qRollupIns))
	if err != nil {
		return err
	}
	sel, err := q.stmt(ctx, s.q(s.qRollupSel()))
	if err != nil {
		return err
	}
	upd, err := q.stmt(ctx, s.q(qRollupUpd))
	if err != nil {
		return err
	}
	for _, r := range rows {
		key := []any{int64(r.Width), r.Bucket.UnixNano(), r.Probe, r.Command, r.Cell, r.Transport, r.Pattern}
		// A new row is one statement; an existing one is read and
		// written back merged.
		var n int64
		err := ins.QueryRowContext(ctx, append(key, r.Runs, r.Tests, r.OK, r.Invalid, encodeSketches(r.Sketches))...).Scan(&n)
		if err == nil {
			continue
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("roll-up row: %w", err)
		}
		cur := Rollup{RollupKey: r.RollupKey}
		var blob []byte
		if err := sel.QueryRowContext(ctx, key...).Scan(&cur.Runs, &cur.Tests, &cur.OK, &cur.Invalid, &blob); err != nil {
			return fmt.Errorf("roll-up row: %w", err)
		}
		if cur.Sketches, err = decodeSketches(blob); err != nil {
			return fmt.Errorf("roll-up row %v: %w", key, err)
		}
		cur.Merge(&r)
		if _, err := upd.ExecContext(ctx, append([]any{cur.Runs, cur.Tests, cur.OK, cur.Invalid, encodeSketches(cur.Sketches)}, key...)...); err != nil {
			return fmt.Errorf("roll-up row: %w", err)
		}
	}
	return nil
}

// AddRollups adds rows to the roll-ups as if their runs had been derived
// (benchmarks and tests fill a synthetic fleet with it).
func (s *sqlStore) AddRollups(ctx context.Context, rows []Rollup) error {
	rows = slices.Clone(rows)
	slices.SortFunc(rows, func(x, y Rollup) int { return x.compare(y.RollupKey) })
	return s.inTx(ctx, func(tx *sql.Tx) error { return s.mergeRollups(ctx, tx, rows) })
}

// keySep joins a roll-up key's text columns in a read: a control byte no
// probe, path, transport or pattern name holds (ingest refuses them).
const keySep = "\x1f"

// RollupFilter chooses roll-up rows of one width whose bucket starts in
// [Since, Until) (zero: unbounded), of one probe if Probe is set.
type RollupFilter struct {
	Probe        string
	Width        time.Duration
	Since, Until time.Time
}

// Rollups calls fn with each chosen row (in no promised order), one at a
// time: memory does not grow with the rows read.
func (s *sqlStore) Rollups(ctx context.Context, f RollupFilter, fn func(Rollup) error) error {
	if f.Width == 0 {
		f.Width = Day
	}
	var where []string
	args := []any{int64(f.Width)}
	where = append(where, "width = ?")
	if !f.Since.IsZero() {
		where, args = append(where, "bucket >= ?"), append(args, f.Since.UnixNano())
	}
	if !f.Until.IsZero() {
		where, args = append(where, "bucket < ?"), append(args, f.Until.UnixNano())
	}
	if f.Probe != "" {
		where, args = append(where, "probe = ?"), append(args, f.Probe)
	}
	// The key's text columns as one (each column read costs more than its
	// bytes: a fleet view reads tens of thousands of rows).
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT bucket, probe || '`+keySep+`' || command || '`+keySep+`' || cell || '`+keySep+`' || transport || '`+keySep+`' || pattern,
		runs, tests, ok, invalid, sketches FROM rollups WHERE `+strings.Join(where, " AND ")), args...)
	if err != nil {
		return fmt.Errorf("read roll-ups: %w", err)
	}
	defer rows.Close()
	var blob []byte
	var key string
	for rows.Next() {
		r := Rollup{RollupKey: RollupKey{Width: f.Width}}
		var b int64
		if err := rows.Scan(&b, &key, &r.Runs, &r.Tests, &r.OK, &r.Invalid, &blob); err != nil {
			return fmt.Errorf("read roll-ups: %w", err)
		}
		parts := strings.SplitN(key, keySep, 5)
		if len(parts) != 5 {
			return fmt.Errorf("read roll-ups: key %q", key)
		}
		r.Probe, r.Command, r.Cell, r.Transport, r.Pattern = parts[0], parts[1], parts[2], parts[3], parts[4]
		r.Bucket = time.Unix(0, b).UTC()
		if r.Sketches, err = decodeSketches(blob); err != nil {
			return fmt.Errorf("roll-up %s %s: %w", r.Probe, r.Bucket.Format(time.RFC3339), err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// ResetRollups empties the roll-ups and marks every derived run as not
// rolled up, so deriving the runs again (reindex, or the collector's
// catch-up after an interrupted reindex) rebuilds them.
func (s *sqlStore) ResetRollups(ctx context.Context) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM rollups`); err != nil {
			return fmt.Errorf("reset roll-ups: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE derived_runs SET rolled_up = FALSE`); err != nil {
			return fmt.Errorf("reset roll-ups: %w", err)
		}
		return nil
	})
}

// PruneRollups removes hour rows of buckets before before.
func (s *sqlStore) PruneRollups(ctx context.Context, before time.Time) error {
	_, err := s.wdb.ExecContext(ctx, s.q(`DELETE FROM rollups WHERE width = ? AND bucket < ?`), int64(Hour), before.UnixNano())
	if err != nil {
		return fmt.Errorf("prune hour roll-ups: %w", err)
	}
	return nil
}
