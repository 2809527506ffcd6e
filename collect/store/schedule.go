package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
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

// PutSchedule stores body as the next revision of probe's schedule;
// ErrNotFound when probe is neither AnyProbe nor an enrolled, live probe
// (a typo would otherwise never apply).
func (s *sqlStore) PutSchedule(ctx context.Context, probe string, body []byte) (int64, error) {
	var rev int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if probe != AnyProbe {
			var n int
			if err := tx.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM probes WHERE name = ? AND revoked_at IS NULL`), probe).Scan(&n); err != nil {
				return err
			}
			if n == 0 {
				return fmt.Errorf("probe %q: %w (enrol it with collect probe add, or use '*')", probe, ErrNotFound)
			}
		}
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

// PutProbeStatus replaces what probe last reported about itself (JSON).
func (s *sqlStore) PutProbeStatus(ctx context.Context, probe string, body []byte, now time.Time) error {
	_, err := s.wdb.ExecContext(ctx, s.q(`INSERT INTO probe_status (probe, body, reported_at) VALUES (?, ?, ?)
		ON CONFLICT (probe) DO UPDATE SET body = excluded.body, reported_at = excluded.reported_at`), probe, string(body), now.UnixNano())
	return err
}

// ProbeStatuses returns every probe's last status report by name.
func (s *sqlStore) ProbeStatuses(ctx context.Context) (map[string][]byte, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT probe, body FROM probe_status`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]byte{}
	for rows.Next() {
		var p, b string
		if err := rows.Scan(&p, &b); err != nil {
			return nil, err
		}
		out[p] = []byte(b)
	}
	return out, rows.Err()
}
