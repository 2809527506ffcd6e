package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// ExportFilter selects the runs an export covers: by probe, and by start
// time (Since inclusive, Until exclusive), as RunFilter does.
type ExportFilter struct {
	Probe        string
	Since, Until time.Time
}

// RunRef names the run a derived row belongs to, with what an analyst
// groups by.
type RunRef struct {
	RunID     string
	ProbeID   string
	Command   string
	StartedAt time.Time
}

// ExportSink takes every row of the index and the derived tables for the
// runs an ExportFilter selects, one at a time.
type ExportSink interface {
	Run(Run) error
	Cell(RunRef, SurveyCell) error
	// Probe gets a survey's probe records with their order in the run.
	Probe(ref RunRef, seq int64, p SurveyProbe) error
	// Test gets a pattern test without its PathBytes (PathBytes does).
	Test(RunRef, PatternTest) error
	PathBytes(ref RunRef, index int64, b PathBytes) error
	Mobile(RunRef, MobileSummary) error
}

// exportQuery is one table's SELECT joined with its run; scan reads a row.
type exportQuery struct {
	cols, from string
	scan       func(rows *sql.Rows, ref *RunRef, sink ExportSink) error
}

const refCols = `r.run_id, r.probe_id, r.command, r.started_at`

var exportQueries = []exportQuery{
	{`probe_path, resolve_path, targets, responsive, unresponsive, unresponsive_pct, rtt_p50_ms, rtt_mean_ms`, `survey_cells`,
		func(rows *sql.Rows, ref *RunRef, sink ExportSink) error {
			var c SurveyCell
			var started int64
			if err := rows.Scan(&ref.RunID, &ref.ProbeID, &ref.Command, &started, &c.ProbePath, &c.ResolvePath, &c.Targets,
				&c.Responsive, &c.Unresponsive, &c.UnresponsivePct, &c.RTTP50ms, &c.RTTMeanms); err != nil {
				return err
			}
			ref.StartedAt = fromNanos(started)
			return sink.Cell(*ref, c)
		}},
	{`seq, probe_path, resolve_path, address, method, sent, received, responsive, valid`, `survey_probes`,
		func(rows *sql.Rows, ref *RunRef, sink ExportSink) error {
			var p SurveyProbe
			var started, seq int64
			if err := rows.Scan(&ref.RunID, &ref.ProbeID, &ref.Command, &started, &seq, &p.ProbePath, &p.ResolvePath, &p.Address,
				&p.Method, &p.Sent, &p.Received, &p.Responsive, &p.Valid); err != nil {
				return err
			}
			ref.StartedAt = fromNanos(started)
			return sink.Probe(*ref, seq, p)
		}},
	{`idx, pattern, transport, path, status, invalid`, `pattern_tests`,
		func(rows *sql.Rows, ref *RunRef, sink ExportSink) error {
			var t PatternTest
			var started int64
			if err := rows.Scan(&ref.RunID, &ref.ProbeID, &ref.Command, &started, &t.Index, &t.Pattern, &t.Transport, &t.Path,
				&t.Status, &t.Invalid); err != nil {
				return err
			}
			ref.StartedAt = fromNanos(started)
			return sink.Test(*ref, t)
		}},
	{`idx, path, bytes_sent, bytes_received`, `pattern_path_bytes`,
		func(rows *sql.Rows, ref *RunRef, sink ExportSink) error {
			var b PathBytes
			var started, idx int64
			if err := rows.Scan(&ref.RunID, &ref.ProbeID, &ref.Command, &started, &idx, &b.Path, &b.Sent, &b.Received); err != nil {
				return err
			}
			ref.StartedAt = fromNanos(started)
			return sink.PathBytes(*ref, idx, b)
		}},
	{`idx, transport, primary_path, backup_path, ended, status, handover_status, cause, first_backup_data_ns,
		duration_sent_ns, duration_received_ns, upload_count, upload_lost, upload_p50_ns, upload_p99_ns, upload_max_ns,
		download_count, download_lost, download_p50_ns, download_p99_ns, download_max_ns, mptcp_ratio_upload,
		mptcp_ratio_download`, `mobile_summaries`,
		func(rows *sql.Rows, ref *RunRef, sink ExportSink) error {
			var m MobileSummary
			var started int64
			if err := rows.Scan(&ref.RunID, &ref.ProbeID, &ref.Command, &started, &m.Index, &m.Transport, &m.Primary, &m.Backup,
				&m.Ended, &m.Status, &m.HandoverStatus, &m.Cause, &m.FirstBackupData, &m.DurationSent, &m.DurationReceived,
				&m.Upload.Count, &m.Upload.Lost, &m.Upload.P50, &m.Upload.P99, &m.Upload.Max,
				&m.Download.Count, &m.Download.Lost, &m.Download.P50, &m.Download.P99, &m.Download.Max,
				&m.MPTCPRatioUpload, &m.MPTCPRatioDownload); err != nil {
				return err
			}
			ref.StartedAt = fromNanos(started)
			return sink.Mobile(*ref, m)
		}},
}

// Export streams the runs f selects and their derived rows into sink,
// table by table, each in the runs' order.
func (s *sqlStore) Export(ctx context.Context, f ExportFilter, sink ExportSink) error {
	where := []string{notQuarantined("r")}
	var args []any
	if f.Probe != "" {
		where, args = append(where, "r.probe_id = ?"), append(args, f.Probe)
	}
	if !f.Since.IsZero() {
		where, args = append(where, "r.started_at >= ?"), append(args, nanos(f.Since))
	}
	if !f.Until.IsZero() {
		where, args = append(where, "r.started_at < ?"), append(args, nanos(f.Until))
	}
	cond := " WHERE " + strings.Join(where, " AND ")
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+prefixed("r.", runColumns)+` FROM runs r`+cond+` ORDER BY r.seq`), args...)
	if err != nil {
		return fmt.Errorf("export runs: %w", err)
	}
	err = eachRow(rows, func() error {
		r, err := scanRun(rows)
		if err != nil {
			return err
		}
		return sink.Run(r)
	})
	if err != nil {
		return fmt.Errorf("export runs: %w", err)
	}
	for _, q := range exportQueries {
		rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+refCols+`, `+prefixed("x.", q.cols)+` FROM `+q.from+` x JOIN runs r ON r.run_id = x.run_id`+
			cond+` ORDER BY r.seq`), args...)
		if err != nil {
			return fmt.Errorf("export %s: %w", q.from, err)
		}
		var ref RunRef
		if err := eachRow(rows, func() error { return q.scan(rows, &ref, sink) }); err != nil {
			return fmt.Errorf("export %s: %w", q.from, err)
		}
	}
	return nil
}

func eachRow(rows *sql.Rows, fn func() error) error {
	defer rows.Close()
	for rows.Next() {
		if err := fn(); err != nil {
			return err
		}
	}
	return rows.Err()
}

// prefixed qualifies each of a comma-separated column list.
func prefixed(p, cols string) string {
	fs := strings.Split(cols, ",")
	for i, c := range fs {
		fs[i] = p + strings.TrimSpace(c)
	}
	return strings.Join(fs, ", ")
}
