package store

import (
	"context"
	"database/sql"
	"errors"
)

// AnyProbe is the schedule of every probe without its own.
const AnyProbe = "*"

// Schedule is a probe's (or AnyProbe's) fleet schedule; the revision goes
// up by one with every change.
type Schedule struct {
	Probe    string
	Revision int64
	Body     []byte
}

// PutSchedule stores body as the next revision of probe's schedule.
func (s *sqlStore) PutSchedule(ctx context.Context, probe string, body []byte) (int64, error) {
	var rev int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, s.q(`SELECT revision FROM schedules WHERE probe = ?`), probe).Scan(&rev)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		rev++
		_, err = tx.ExecContext(ctx, s.q(`INSERT INTO schedules (probe, revision, body, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (probe) DO UPDATE SET revision = excluded.revision, body = excluded.body, updated_at = excluded.updated_at`),
			probe, rev, string(body), 0)
		return err
	})
	return rev, err
}

// GetSchedule returns probe's own schedule, else AnyProbe's, else ErrNotFound.
func (s *sqlStore) GetSchedule(ctx context.Context, probe string) (Schedule, error) {
	for _, p := range []string{probe, AnyProbe} {
		sc := Schedule{Probe: p}
		var body string
		err := s.db.QueryRowContext(ctx, s.q(`SELECT revision, body FROM schedules WHERE probe = ?`), p).Scan(&sc.Revision, &body)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return Schedule{}, err
		}
		sc.Body = []byte(body)
		return sc, nil
	}
	return Schedule{}, ErrNotFound
}
