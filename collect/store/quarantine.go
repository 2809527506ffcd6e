package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// notQuarantined is the condition leaving out quarantined runs, for runs
// under the name (or alias) t.
func notQuarantined(t string) string {
	return `NOT EXISTS (SELECT 1 FROM quarantine qr WHERE qr.run_id = ` + t + `.run_id)`
}

// Quarantine hides the run and takes it out of the roll-ups. A sketch
// cannot subtract, so the run probe's roll-up rows of the run's UTC day
// (the day row and its hour rows: every bucket that holds the run) are
// deleted and the probe's other runs started that day are marked not
// rolled up: the deriver's catch-up (ListUnderived) adds them again,
// which rebuilds those rows without the run, as a reindex would.
func (s *sqlStore) Quarantine(ctx context.Context, runID, reason string, now time.Time) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if s.d == postgresDialect {
			// Derivers on other replicas write roll-ups concurrently: one
			// that committed before this lock is rebuilt with the rest,
			// one that has not written its rows yet waits and adds them
			// after the delete. Without the lock a run committed between
			// the delete and the update below would count twice.
			if _, err := tx.ExecContext(ctx, `LOCK TABLE rollups IN SHARE ROW EXCLUSIVE MODE`); err != nil {
				return fmt.Errorf("quarantine: %w", err)
			}
		}
		var probe string
		var started int64
		var parsed bool
		err := tx.QueryRowContext(ctx, s.q(`SELECT probe_id, started_at, parsed FROM runs WHERE run_id = ?`), runID).Scan(&probe, &started, &parsed)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("run %s: %w", runID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("quarantine: %w", err)
		}
		// Quarantining twice keeps the first reason and time.
		res, err := tx.ExecContext(ctx, s.q(`INSERT INTO quarantine (run_id, reason, quarantined_at) VALUES (?, ?, ?) ON CONFLICT (run_id) DO NOTHING`),
			runID, reason, nanos(now))
		if err != nil {
			return fmt.Errorf("quarantine: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 || !parsed {
			return err // already quarantined, or never derived (no start time)
		}
		day := fromNanos(started).UTC().Truncate(Day)
		from, until := day.UnixNano(), day.Add(Day).UnixNano()
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM rollups WHERE probe = ? AND ((width = ? AND bucket = ?) OR (width = ? AND bucket >= ? AND bucket < ?))`),
			probe, int64(Day), from, int64(Hour), from, until); err != nil {
			return fmt.Errorf("quarantine: roll-ups: %w", err)
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE derived_runs SET rolled_up = FALSE WHERE run_id IN
			(SELECT run_id FROM runs WHERE probe_id = ? AND started_at >= ? AND started_at < ?)`), probe, from, until); err != nil {
			return fmt.Errorf("quarantine: roll-ups: %w", err)
		}
		return nil
	})
}
