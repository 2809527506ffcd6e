package store

import (
	"context"
	"fmt"
	"time"
)

// notQuarantined is the condition leaving out quarantined runs, for runs
// under the name (or alias) t.
func notQuarantined(t string) string {
	return `NOT EXISTS (SELECT 1 FROM quarantine qr WHERE qr.run_id = ` + t + `.run_id)`
}

func (s *sqlStore) Quarantine(ctx context.Context, runID, reason string, now time.Time) error {
	var n int
	if err := s.wdb.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM runs WHERE run_id = ?`), runID).Scan(&n); err != nil {
		return fmt.Errorf("quarantine: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("run %s: %w", runID, ErrNotFound)
	}
	// Quarantining twice keeps the first reason and time.
	_, err := s.wdb.ExecContext(ctx, s.q(`INSERT INTO quarantine (run_id, reason, quarantined_at) VALUES (?, ?, ?) ON CONFLICT (run_id) DO NOTHING`),
		runID, reason, nanos(now))
	if err != nil {
		return fmt.Errorf("quarantine: %w", err)
	}
	return nil
}
