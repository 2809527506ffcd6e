package store

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
)

// putBatchTx stores a batch of uploads in tx with one multi-row statement
// per table instead of four or more per upload (PostgreSQL: every
// statement is a round trip), and one UPDATE per probe in name order (so
// concurrent batches never lock probe rows in opposite orders). The
// outcome of each job is what putTx would give it.
func (s *sqlStore) putBatchTx(ctx context.Context, tx *sql.Tx, batch []*putJob) ([]putResult, error) {
	res := make([]putResult, len(batch))
	var b strings.Builder
	var args []any
	b.WriteString(`INSERT INTO runs (run_id, probe_id, command, schema_version, status, parsed,
		started_at, finished_at, records, bytes, sha256, raw_path, content_type, upload_path, stored_at) VALUES `)
	for i, j := range batch {
		r := j.r
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(placeholders(len(args), 15))
		args = append(args, r.RunID, r.ProbeID, r.Command, r.SchemaVersion, r.Status, r.Parsed, nanos(r.StartedAt), nanos(r.FinishedAt),
			r.Records, r.Bytes, r.SHA256, r.RawPath, r.ContentType, r.UploadPath, nanos(r.StoredAt))
	}
	b.WriteString(` ON CONFLICT (run_id) DO NOTHING RETURNING run_id, seq`)
	rows, err := tx.QueryContext(ctx, b.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("insert runs: %w", err)
	}
	seqs := map[string]int64{}
	for rows.Next() {
		var id string
		var seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			rows.Close()
			return nil, err
		}
		seqs[id] = seq
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("insert runs: %w", err)
	}

	var raws, paths []any
	type seen struct {
		rep    Report
		runs   int64
		status string
	}
	probes := map[string]*seen{}
	for i, j := range batch {
		r := j.r
		if rep := j.rep; rep.Probe != "" {
			p := probes[rep.Probe]
			if p == nil {
				p = &seen{}
				probes[rep.Probe] = p
			}
			dropped := p.rep.Dropped + rep.Dropped
			if rep.Seen.After(p.rep.Seen) || p.rep.Seen.IsZero() {
				p.rep = rep
			}
			p.rep.Dropped = dropped
		}
		seq, ok := seqs[r.RunID]
		if !ok {
			// Stored before, or by an earlier job of this batch.
			old, err := s.getRun(ctx, tx, r.RunID)
			if err != nil {
				return nil, err
			}
			o := Conflict
			if old.SHA256 == r.SHA256 {
				o = Duplicate
			}
			res[i] = putResult{r: old, o: o}
			continue
		}
		delete(seqs, r.RunID)
		r.Seq = seq
		if r.RawPath == RawInline {
			raws = append(raws, r.RunID, r.Raw)
			r.Raw = nil
		}
		for _, p := range r.Paths {
			paths = append(paths, r.RunID, p.Name, p.Kind)
		}
		if j.rep.Probe != "" {
			probes[j.rep.Probe].runs++
			probes[j.rep.Probe].status = r.Status
		}
		res[i] = putResult{r: r, o: Stored}
	}
	if err := s.insertMulti(ctx, tx, `INSERT INTO raw_inline (run_id, body) VALUES `, "", 2, raws); err != nil {
		return nil, fmt.Errorf("insert raw bodies: %w", err)
	}
	if err := s.insertMulti(ctx, tx, `INSERT INTO paths (run_id, name, kind) VALUES `, ` ON CONFLICT DO NOTHING`, 3, paths); err != nil {
		return nil, fmt.Errorf("insert paths: %w", err)
	}
	names := make([]string, 0, len(probes))
	for n := range probes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := probes[n]
		var err error
		if p.runs > 0 {
			_, err = tx.ExecContext(ctx, `UPDATE probes SET last_seen = $1, backlog = $2, dropped = dropped + $3, runs = runs + $4, last_status = $5 WHERE name = $6`,
				nanos(p.rep.Seen), p.rep.Backlog, p.rep.Dropped, p.runs, p.status, n)
		} else {
			_, err = tx.ExecContext(ctx, `UPDATE probes SET last_seen = $1, backlog = $2, dropped = dropped + $3 WHERE name = $4`,
				nanos(p.rep.Seen), p.rep.Backlog, p.rep.Dropped, n)
		}
		if err != nil {
			return nil, fmt.Errorf("update probe: %w", err)
		}
	}
	return res, nil
}

// insertMulti inserts args (width values a row) with one statement.
func (s *sqlStore) insertMulti(ctx context.Context, tx *sql.Tx, head, tail string, width int, args []any) error {
	if len(args) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString(head)
	for i := 0; i < len(args); i += width {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(placeholders(i, width))
	}
	b.WriteString(tail)
	_, err := tx.ExecContext(ctx, b.String(), args...)
	return err
}

// placeholders is "($from+1, …, $from+n)".
func placeholders(from, n int) string {
	var b strings.Builder
	b.WriteString("(")
	for k := 1; k <= n; k++ {
		if k > 1 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "$%d", from+k)
	}
	b.WriteString(")")
	return b.String()
}
