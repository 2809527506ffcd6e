package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// pgCommitters is how many PostgreSQL group commits may be in flight at
// once: while one waits for its WAL flush the next batch is sent, so the
// server is never idle waiting for the collector's next round trip.
const pgCommitters = 2

// qPutBatch stores a batch's new runs with their inline bodies and paths
// in one statement. The rows come as arrays (one per column), so the text
// never changes with the batch's size and is prepared once per connection;
// runs are inserted in run_id order, so concurrent batches (of this
// collector or of a replica) wait for each other's run_ids in one order
// and cannot deadlock. Bodies and paths go in only for the runs this
// statement inserted; the others were stored before.
const qPutBatch = `WITH v AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bool[], $7::int8[], $8::int8[],
		$9::int8[], $10::int8[], $11::text[], $12::text[], $13::text[], $14::text[], $15::int8[])
	AS v(run_id, probe_id, command, schema_version, status, parsed, started_at, finished_at, records, bytes, sha256, raw_path,
		content_type, upload_path, stored_at)
), ins AS (
	INSERT INTO runs (run_id, probe_id, command, schema_version, status, parsed, started_at, finished_at, records, bytes,
		sha256, raw_path, content_type, upload_path, stored_at)
	SELECT * FROM v ORDER BY run_id
	ON CONFLICT (run_id) DO NOTHING RETURNING run_id, seq
), raw AS (
	INSERT INTO raw_inline (run_id, body)
	SELECT b.run_id, b.body FROM unnest($16::text[], $17::bytea[]) AS b(run_id, body) JOIN ins USING (run_id)
), pth AS (
	INSERT INTO paths (run_id, name, kind)
	SELECT p.run_id, p.name, p.kind FROM unnest($18::text[], $19::text[], $20::text[]) AS p(run_id, name, kind) JOIN ins USING (run_id)
	ON CONFLICT DO NOTHING
)
SELECT run_id, seq FROM ins`

// commitPG stores a group commit's uploads in one transaction of two
// round trips: BEGIN with qPutBatch, then one UPDATE per probe (in name
// order, so concurrent batches never lock probe rows in opposite orders)
// with COMMIT. Probe rows are locked only from the second round trip to
// the commit. The outcome of each job is what putTx would give it; a
// job's result is sent only once the commit is durable.
func (s *sqlStore) commitPG(batch []*putJob) []putResult {
	ctx := context.Background()
	res := make([]putResult, len(batch))
	fail := func(err error) []putResult {
		for i := range res {
			res[i] = putResult{err: err}
		}
		return res
	}
	// Only the first job of a run_id goes in; the others are answered
	// from what was stored, once it is committed.
	lead := make([]int, 0, len(batch))
	first := make(map[string]int, len(batch))
	for i, j := range batch {
		if _, ok := first[j.r.RunID]; !ok {
			first[j.r.RunID] = i
			lead = append(lead, i)
		}
	}
	sort.Slice(lead, func(a, b int) bool { return batch[lead[a]].r.RunID < batch[lead[b]].r.RunID })

	conn, err := s.wdb.Conn(ctx)
	if err != nil {
		return fail(err)
	}
	defer conn.Close()
	var stored map[string]int64
	err = conn.Raw(func(dc any) error {
		c := dc.(*stdlib.Conn).Conn()
		var err error
		stored, err = s.putBatchPG(ctx, c, batch, lead, first)
		if err != nil && c.PgConn().TxStatus() != 'I' {
			// Leave no transaction open on the pooled connection.
			if _, rerr := c.Exec(ctx, "ROLLBACK"); rerr != nil {
				return errors.Join(err, driver.ErrBadConn)
			}
		}
		return err
	})
	if err != nil {
		return fail(err)
	}
	for i, j := range batch {
		r := j.r
		if seq, ok := stored[r.RunID]; ok && first[r.RunID] == i {
			r.Seq, r.Raw = seq, nil
			res[i] = putResult{r: r, o: Stored}
			continue
		}
		// Stored before, or by an earlier job of this batch.
		old, err := s.getRun(ctx, s.rq, r.RunID)
		if err != nil {
			res[i] = putResult{err: err}
			continue
		}
		o := Conflict
		if old.SHA256 == r.SHA256 {
			o = Duplicate
		}
		res[i] = putResult{r: old, o: o}
	}
	return res
}

// putBatchPG runs commitPG's transaction on c and returns the seq of
// every run it stored.
func (s *sqlStore) putBatchPG(ctx context.Context, c *pgx.Conn, batch []*putJob, lead []int, first map[string]int) (map[string]int64, error) {
	n := len(lead)
	var (
		ids, probes, commands, versions, statuses, shas, rawPaths, types, uploadPaths = make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		parsed                                   = make([]bool, n)
		started, finished, records, sizes, times = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		rawIDs, pathIDs, pathNames, pathKinds    []string
		bodies                                   [][]byte
	)
	for k, i := range lead {
		r := batch[i].r
		ids[k], probes[k], commands[k], versions[k], statuses[k] = r.RunID, r.ProbeID, r.Command, r.SchemaVersion, r.Status
		parsed[k], started[k], finished[k], records[k], sizes[k] = r.Parsed, nanos(r.StartedAt), nanos(r.FinishedAt), r.Records, r.Bytes
		shas[k], rawPaths[k], types[k], uploadPaths[k], times[k] = r.SHA256, r.RawPath, r.ContentType, r.UploadPath, nanos(r.StoredAt)
		if r.RawPath == RawInline {
			rawIDs, bodies = append(rawIDs, r.RunID), append(bodies, r.Raw)
		}
		for _, p := range r.Paths {
			pathIDs, pathNames, pathKinds = append(pathIDs, r.RunID), append(pathNames, p.Name), append(pathKinds, p.Kind)
		}
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(qPutBatch, ids, probes, commands, versions, statuses, parsed, started, finished, records, sizes, shas, rawPaths,
		types, uploadPaths, times, rawIDs, bodies, pathIDs, pathNames, pathKinds)
	br := c.SendBatch(ctx, b)
	stored := make(map[string]int64, n)
	_, err := br.Exec()
	if err == nil {
		var rows pgx.Rows
		rows, err = br.Query()
		if err == nil {
			var id string
			var seq int64
			_, err = pgx.ForEachRow(rows, []any{&id, &seq}, func() error { stored[id] = seq; return nil })
		}
	}
	if err = errors.Join(err, br.Close()); err != nil {
		return nil, fmt.Errorf("insert runs: %w", err)
	}

	b = &pgx.Batch{}
	for _, u := range probeUpdates(batch, stored, first) {
		if u.runs > 0 {
			b.Queue(`UPDATE probes SET last_seen = $1, backlog = $2, dropped = dropped + $3, runs = runs + $4, last_status = $5 WHERE name = $6`,
				nanos(u.rep.Seen), u.rep.Backlog, u.rep.Dropped, u.runs, u.status, u.name)
		} else {
			b.Queue(`UPDATE probes SET last_seen = $1, backlog = $2, dropped = dropped + $3 WHERE name = $4`,
				nanos(u.rep.Seen), u.rep.Backlog, u.rep.Dropped, u.name)
		}
	}
	b.Queue("COMMIT")
	br = c.SendBatch(ctx, b)
	for range b.Len() - 1 {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if err == nil {
		var ct interface{ String() string }
		ct, err = br.Exec()
		// COMMIT of a failed transaction answers ROLLBACK, not an error.
		if err == nil && ct.String() != "COMMIT" {
			err = fmt.Errorf("commit answered %s", ct)
		}
	}
	if err = errors.Join(err, br.Close()); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return stored, nil
}

// probeUpdate is what one group commit changes in a probe's row.
type probeUpdate struct {
	name   string
	rep    Report // the latest report, with the drops of all summed
	runs   int64  // runs stored
	status string // of the last run stored
}

// probeUpdates folds a batch's reports into one update per probe, in
// name order; stored holds the run_ids the batch stored, first the index
// of each run_id's first job (the one that stored it).
func probeUpdates(batch []*putJob, stored map[string]int64, first map[string]int) []probeUpdate {
	byName := map[string]*probeUpdate{}
	for i, j := range batch {
		rep := j.rep
		if rep.Probe == "" {
			continue
		}
		p := byName[rep.Probe]
		if p == nil {
			p = &probeUpdate{name: rep.Probe}
			byName[rep.Probe] = p
		}
		dropped := p.rep.Dropped + rep.Dropped
		if rep.Seen.After(p.rep.Seen) || p.rep.Seen.IsZero() {
			p.rep = rep
		}
		p.rep.Dropped = dropped
		if _, ok := stored[j.r.RunID]; ok && first[j.r.RunID] == i {
			p.runs++
			p.status = j.r.Status
		}
	}
	out := make([]probeUpdate, 0, len(byName))
	for _, p := range byName {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b probeUpdate) int { return strings.Compare(a.name, b.name) })
	return out
}
