package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

type dialect int

const (
	sqliteDialect dialect = iota
	postgresDialect
)

func (d dialect) String() string { return [...]string{"sqlite", "postgres"}[d] }

// sqlStore is both backends: the SQL is the same, only placeholders and the
// write path differ (SQLite has one writer, fed in batches by putter).
type sqlStore struct {
	d   dialect
	db  *sql.DB // reads (and every write on PostgreSQL)
	wdb *sql.DB // the writer: SQLite's single connection; db on PostgreSQL
	put func(ctx context.Context, r Run, rep Report) (Run, Outcome, error)
	end func()
	// rq and wq run the upload path's statements prepared once, on db
	// and on wdb (newSQLStore).
	rq, wq *stmts
}

func newSQLStore(d dialect, db, wdb *sql.DB) *sqlStore {
	s := &sqlStore{d: d, db: db, wdb: wdb, rq: newStmts(db), wq: newStmts(wdb)}
	if wdb == db {
		s.wq = s.rq
	}
	return s
}

// Open opens (creating and migrating) the store named by dsn:
// postgres://… or postgresql://… for PostgreSQL; otherwise a SQLite file
// path, optionally prefixed sqlite:// or file:.
func Open(ctx context.Context, dsn string) (Store, error) {
	if IsPostgres(dsn) {
		return openPostgres(ctx, dsn)
	}
	return openSQLite(ctx, dsn)
}

// IsPostgres says whether dsn names a PostgreSQL server.
func IsPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// q rewrites ? placeholders as PostgreSQL's $n.
func (s *sqlStore) q(query string) string {
	if s.d != postgresDialect {
		return query
	}
	var b strings.Builder
	n := 0
	for _, c := range query {
		if c == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func fromNull(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromNanos(n.Int64)
	return &t
}

func (s *sqlStore) PutRun(ctx context.Context, r Run, rep Report) (Run, Outcome, error) {
	return s.put(ctx, r, rep)
}

// The statements of the upload path, prepared once (warm).
const (
	qInsertRun = `INSERT INTO runs (run_id, probe_id, command, schema_version, status, parsed,
		started_at, finished_at, records, bytes, sha256, raw_path, content_type, upload_path, stored_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO NOTHING RETURNING seq`
	qInsertRaw  = `INSERT INTO raw_inline (run_id, body) VALUES (?, ?)`
	qInsertPath = `INSERT INTO paths (run_id, name, kind) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`
	qSeenRun    = `UPDATE probes SET last_seen = ?, backlog = ?, dropped = dropped + ?, runs = runs + 1, last_status = ? WHERE name = ?`
	qSeen       = `UPDATE probes SET last_seen = ?, backlog = ?, dropped = dropped + ? WHERE name = ?`
	qGetRun     = `SELECT ` + runColumns + ` FROM runs WHERE run_id = ?`
	qGetPaths   = `SELECT name, kind FROM paths WHERE run_id = ? ORDER BY name`
)

// warm prepares the upload path's statements on the writer before any
// transaction needs them (SQLite's writer has one connection: a statement
// cannot be prepared on it while a transaction holds it).
func (s *sqlStore) warm(ctx context.Context) error {
	for _, q := range []string{qInsertRun, qInsertRaw, qInsertPath, qSeenRun, qSeen, qGetRun, qGetPaths,
		qInsertCell, qInsertProbe, qInsertTest, qInsertPathBytes, qInsertMobile, qRollupIns, qRollupUpd, s.qRollupSel()} {
		if _, err := s.wq.stmt(ctx, s.q(q)); err != nil {
			return err
		}
	}
	return nil
}

// putTx stores one run inside tx; the caller commits.
func (s *sqlStore) putTx(ctx context.Context, sqlTx *sql.Tx, r Run, rep Report) (Run, Outcome, error) {
	tx := s.wq.in(sqlTx)
	var seq int64
	err := tx.QueryRowContext(ctx, s.q(qInsertRun),
		r.RunID, r.ProbeID, r.Command, r.SchemaVersion, r.Status, r.Parsed, nanos(r.StartedAt), nanos(r.FinishedAt),
		r.Records, r.Bytes, r.SHA256, r.RawPath, r.ContentType, r.UploadPath, nanos(r.StoredAt)).Scan(&seq)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		old, err := s.getRun(ctx, tx, r.RunID)
		if err != nil {
			return Run{}, 0, err
		}
		if err := s.seenTx(ctx, tx, rep, ""); err != nil {
			return Run{}, 0, err
		}
		if old.SHA256 == r.SHA256 {
			return old, Duplicate, nil
		}
		return old, Conflict, nil
	case err != nil:
		return Run{}, 0, fmt.Errorf("insert run: %w", err)
	}
	r.Seq = seq
	if r.RawPath == RawInline {
		if _, err := tx.ExecContext(ctx, s.q(qInsertRaw), r.RunID, r.Raw); err != nil {
			return Run{}, 0, fmt.Errorf("insert raw body: %w", err)
		}
		r.Raw = nil
	}
	for _, p := range r.Paths {
		if _, err := tx.ExecContext(ctx, s.q(qInsertPath),
			r.RunID, p.Name, p.Kind); err != nil {
			return Run{}, 0, fmt.Errorf("insert path: %w", err)
		}
	}
	if err := s.seenTx(ctx, tx, rep, r.Status); err != nil {
		return Run{}, 0, err
	}
	return r, Stored, nil
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// seenTx updates the probe row; status "" leaves the run count alone.
func (s *sqlStore) seenTx(ctx context.Context, q querier, rep Report, status string) error {
	if rep.Probe == "" {
		return nil
	}
	var err error
	if status != "" {
		_, err = q.ExecContext(ctx, s.q(qSeenRun),
			nanos(rep.Seen), rep.Backlog, rep.Dropped, status, rep.Probe)
	} else {
		_, err = q.ExecContext(ctx, s.q(qSeen),
			nanos(rep.Seen), rep.Backlog, rep.Dropped, rep.Probe)
	}
	if err != nil {
		return fmt.Errorf("update probe: %w", err)
	}
	return nil
}

// runTime is when a run happened for RunFilter's window: its start, or
// for an upload the server could not parse (no start time, stored as 0)
// when it was stored, so that a window still lists it (as not read)
// instead of losing it from every windowed view.
const runTime = "(CASE WHEN started_at = 0 THEN stored_at ELSE started_at END)"

const runColumns = `seq, run_id, probe_id, command, schema_version, status, parsed, started_at, finished_at,
	records, bytes, sha256, raw_path, content_type, upload_path, stored_at`

func scanRun(sc interface{ Scan(...any) error }) (Run, error) {
	var r Run
	var started, finished, stored int64
	err := sc.Scan(&r.Seq, &r.RunID, &r.ProbeID, &r.Command, &r.SchemaVersion, &r.Status, &r.Parsed,
		&started, &finished, &r.Records, &r.Bytes, &r.SHA256, &r.RawPath, &r.ContentType, &r.UploadPath, &stored)
	r.StartedAt, r.FinishedAt, r.StoredAt = fromNanos(started), fromNanos(finished), fromNanos(stored)
	return r, err
}

func (s *sqlStore) getRun(ctx context.Context, q querier, runID string) (Run, error) {
	r, err := scanRun(q.QueryRowContext(ctx, s.q(qGetRun), runID))
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, ErrNotFound
	}
	if err != nil {
		return Run{}, fmt.Errorf("get run: %w", err)
	}
	rows, err := q.QueryContext(ctx, s.q(qGetPaths), runID)
	if err != nil {
		return Run{}, fmt.Errorf("get paths: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var p Path
		if err := rows.Scan(&p.Name, &p.Kind); err != nil {
			return Run{}, err
		}
		r.Paths = append(r.Paths, p)
	}
	return r, rows.Err()
}

func (s *sqlStore) GetRun(ctx context.Context, runID string) (Run, error) {
	return s.getRun(ctx, s.rq, runID)
}

func (s *sqlStore) GetRaw(ctx context.Context, runID string) ([]byte, error) {
	var b []byte
	err := s.rq.QueryRowContext(ctx, s.q(`SELECT body FROM raw_inline WHERE run_id = ?`), runID).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get raw body: %w", err)
	}
	return b, nil
}

// MaxPage bounds one page of ListRuns.
const MaxPage = 1000

func (s *sqlStore) ListRuns(ctx context.Context, f RunFilter) ([]Run, error) {
	where, args := []string{"seq > ?", notQuarantined("runs")}, []any{f.After}
	if f.Probe != "" {
		where, args = append(where, "probe_id = ?"), append(args, f.Probe)
	}
	if f.Command != "" {
		where, args = append(where, "command = ?"), append(args, f.Command)
	}
	if !f.Since.IsZero() {
		where, args = append(where, runTime+" >= ?"), append(args, nanos(f.Since))
	}
	if !f.Until.IsZero() {
		where, args = append(where, runTime+" < ?"), append(args, nanos(f.Until))
	}
	if f.Limit <= 0 || f.Limit > MaxPage {
		f.Limit = MaxPage
	}
	args = append(args, f.Limit)
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+runColumns+` FROM runs WHERE `+strings.Join(where, " AND ")+` ORDER BY seq LIMIT ?`), args...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	defer rows.Close()
	out := []Run{}
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (s *sqlStore) AddProbe(ctx context.Context, name, hash string, now time.Time) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		var live, revoked int
		if err := tx.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FILTER (WHERE revoked_at IS NULL), COUNT(*) FILTER (WHERE revoked_at IS NOT NULL) FROM probes WHERE name = ?`), name).Scan(&live, &revoked); err != nil {
			return err
		}
		switch {
		case live > 0:
			return fmt.Errorf("probe %s: %w", name, ErrExists)
		case revoked > 0:
			// Enrolled again after a revoke (a new token): its runs stay
			// its, the revoked tokens stay revoked.
			if _, err := tx.ExecContext(ctx, s.q(`UPDATE probes SET revoked_at = NULL WHERE name = ?`), name); err != nil {
				return err
			}
		default:
			if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO probes (name, created_at) VALUES (?, ?)`), name, nanos(now)); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, s.q(`INSERT INTO tokens (hash, name, role, created_at) VALUES (?, ?, ?, ?)`), hash, name, RoleProbe, nanos(now))
		return err
	})
}

func (s *sqlStore) AddAdmin(ctx context.Context, name, hash string, now time.Time) error {
	_, err := s.wdb.ExecContext(ctx, s.q(`INSERT INTO tokens (hash, name, role, created_at) VALUES (?, ?, ?, ?)`), hash, name, RoleAdmin, nanos(now))
	return err
}

func (s *sqlStore) Revoke(ctx context.Context, name string, now time.Time) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		// Probes only: an admin of the same name is another namespace.
		res, err := tx.ExecContext(ctx, s.q(`UPDATE tokens SET revoked_at = ? WHERE name = ? AND role = ? AND revoked_at IS NULL`), nanos(now), name, RoleProbe)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("%s: no live token: %w", name, ErrNotFound)
		}
		_, err = tx.ExecContext(ctx, s.q(`UPDATE probes SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL`), nanos(now), name)
		return err
	})
}

func (s *sqlStore) LookupToken(ctx context.Context, hash string) (Token, error) {
	t := Token{Hash: hash}
	err := s.rq.QueryRowContext(ctx, s.q(`SELECT name, role FROM tokens WHERE hash = ? AND revoked_at IS NULL`), hash).Scan(&t.Name, &t.Role)
	if errors.Is(err, sql.ErrNoRows) {
		return Token{}, ErrNotFound
	}
	return t, err
}

func (s *sqlStore) Seen(ctx context.Context, r Report) error {
	return s.seenTx(ctx, s.wdb, r, "")
}

func (s *sqlStore) ListProbes(ctx context.Context) ([]Probe, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, created_at, revoked_at, last_seen, runs, last_status, backlog, dropped FROM probes ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list probes: %w", err)
	}
	defer rows.Close()
	out := []Probe{}
	for rows.Next() {
		var p Probe
		var created int64
		var revoked, seen sql.NullInt64
		if err := rows.Scan(&p.Name, &created, &revoked, &seen, &p.Runs, &p.LastStatus, &p.Backlog, &p.Dropped); err != nil {
			return nil, err
		}
		p.CreatedAt, p.RevokedAt, p.LastSeen = fromNanos(created), fromNull(revoked), fromNull(seen)
		out = append(out, p)
	}
	return out, rows.Err()
}

func (s *sqlStore) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (s *sqlStore) Close() error {
	if s.end != nil {
		s.end()
	}
	s.rq.close()
	s.wq.close()
	err := s.db.Close()
	if s.wdb != s.db {
		err = errors.Join(err, s.wdb.Close())
	}
	return err
}
