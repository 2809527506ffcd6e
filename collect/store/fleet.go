package store

import (
	"context"
	"fmt"
	"time"
)

// Fleet is what the fleet's Prometheus figures are made of, read from the
// probes table and the derived tables only (never the raw uploads): per
// probe its report, and the cells of its last derived survey, the tests
// of its last derived pattern run and the handovers of its last derived
// mobile run.
type Fleet struct {
	Probes    []Probe
	Cells     []FleetCell
	Tests     []FleetTest
	Handovers []FleetHandover
}

// FleetCell is one cell of a probe's last survey; Kinds are the kinds of
// the probing and resolving paths as the run recorded them.
type FleetCell struct {
	Probe, RunID string
	StartedAt    time.Time
	SurveyCell
	ProbeKind, ResolveKind string
}

// FleetTest is one test of a probe's last pattern run, in the run's
// order, with its goodputs in bit/s (nil: none, or derived before they
// were stored).
type FleetTest struct {
	Probe, RunID               string
	StartedAt                  time.Time
	Transport, Pattern, Status string
	Invalid                    bool
	Bulk, Upload, Download     *float64
}

// FleetHandover is one transport of a probe's last mobile run: its
// largest chunk delay per direction.
type FleetHandover struct {
	Probe, RunID     string
	StartedAt        time.Time
	Transport        string
	Upload, Download time.Duration
}

// lastRuns numbers each probe's runs that have rows in table, latest
// first (started_at, then seq).
func lastRuns(table string) string {
	return `WITH last AS (SELECT run_id, probe_id, started_at,
		ROW_NUMBER() OVER (PARTITION BY probe_id ORDER BY started_at DESC, seq DESC) AS n
		FROM runs WHERE run_id IN (SELECT run_id FROM ` + table + `)) `
}

// Fleet reads the fleet's figures: a handful of queries over the derived
// tables, each touching every probe's last run only through the index.
func (s *sqlStore) Fleet(ctx context.Context) (Fleet, error) {
	var f Fleet
	var err error
	if f.Probes, err = s.ListProbes(ctx); err != nil {
		return f, err
	}
	rows, err := s.db.QueryContext(ctx, lastRuns("survey_cells")+`SELECT l.probe_id, l.run_id, l.started_at,
		c.probe_path, c.resolve_path, c.targets, c.responsive, c.unresponsive, c.unresponsive_pct, c.rtt_p50_ms, c.rtt_mean_ms,
		c.rtt_p10_ms, c.rtt_p25_ms, c.rtt_p75_ms, c.rtt_p90_ms, COALESCE(pp.kind, ''), COALESCE(rp.kind, '')
		FROM last l JOIN survey_cells c ON c.run_id = l.run_id
		LEFT JOIN paths pp ON pp.run_id = l.run_id AND pp.name = c.probe_path
		LEFT JOIN paths rp ON rp.run_id = l.run_id AND rp.name = c.resolve_path
		WHERE l.n = 1 ORDER BY l.probe_id, c.probe_path, c.resolve_path`)
	if err != nil {
		return f, fmt.Errorf("fleet cells: %w", err)
	}
	for rows.Next() {
		var c FleetCell
		var at int64
		if err := rows.Scan(&c.Probe, &c.RunID, &at, &c.ProbePath, &c.ResolvePath, &c.Targets, &c.Responsive, &c.Unresponsive,
			&c.UnresponsivePct, &c.RTTP50ms, &c.RTTMeanms, &c.RTTP10ms, &c.RTTP25ms, &c.RTTP75ms, &c.RTTP90ms, &c.ProbeKind, &c.ResolveKind); err != nil {
			rows.Close()
			return f, fmt.Errorf("fleet cells: %w", err)
		}
		c.StartedAt = fromNanos(at)
		f.Cells = append(f.Cells, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return f, fmt.Errorf("fleet cells: %w", err)
	}

	rows, err = s.db.QueryContext(ctx, lastRuns("pattern_tests")+`SELECT l.probe_id, l.run_id, l.started_at, t.transport, t.pattern,
		t.status, t.invalid, t.goodput_bps, t.upload_goodput_bps, t.download_goodput_bps
		FROM last l JOIN pattern_tests t ON t.run_id = l.run_id WHERE l.n = 1 ORDER BY l.probe_id, t.idx`)
	if err != nil {
		return f, fmt.Errorf("fleet tests: %w", err)
	}
	for rows.Next() {
		var x FleetTest
		var at int64
		if err := rows.Scan(&x.Probe, &x.RunID, &at, &x.Transport, &x.Pattern, &x.Status, &x.Invalid, &x.Bulk, &x.Upload, &x.Download); err != nil {
			rows.Close()
			return f, fmt.Errorf("fleet tests: %w", err)
		}
		x.StartedAt = fromNanos(at)
		f.Tests = append(f.Tests, x)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return f, fmt.Errorf("fleet tests: %w", err)
	}

	rows, err = s.db.QueryContext(ctx, lastRuns("mobile_summaries")+`SELECT l.probe_id, l.run_id, l.started_at, m.transport,
		MAX(m.upload_max_ns), MAX(m.download_max_ns)
		FROM last l JOIN mobile_summaries m ON m.run_id = l.run_id WHERE l.n = 1
		GROUP BY l.probe_id, l.run_id, l.started_at, m.transport ORDER BY l.probe_id, m.transport`)
	if err != nil {
		return f, fmt.Errorf("fleet handovers: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var h FleetHandover
		var at, up, down int64
		if err := rows.Scan(&h.Probe, &h.RunID, &at, &h.Transport, &up, &down); err != nil {
			return f, fmt.Errorf("fleet handovers: %w", err)
		}
		h.StartedAt, h.Upload, h.Download = fromNanos(at), time.Duration(up), time.Duration(down)
		f.Handovers = append(f.Handovers, h)
	}
	if err := rows.Err(); err != nil {
		return f, fmt.Errorf("fleet handovers: %w", err)
	}
	return f, nil
}
