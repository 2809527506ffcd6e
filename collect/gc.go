package collect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mptester/mptester/collect/rawstore"
	"github.com/mptester/mptester/collect/store"
)

// GCResult counts what GC found in the raw store.
type GCResult struct {
	Objects int `json:"objects"` // committed objects seen
	Indexed int `json:"indexed"` // named by their run's index row
	Orphans int `json:"orphans"` // no index row names them
	Young   int `json:"young"`   // orphans left alone: younger than minAge
	Removed int `json:"removed"`
}

// GC finds raw objects no index row names (a crash between storing the
// object and committing its row, or the loser of a conflict) and removes
// those older than minAge. Such an upload was never acknowledged, so the
// probe still holds it and sends it again. minAge spares uploads in
// flight on this or another replica (object stored, row not yet
// committed); the clock is the raw store's.
func (s *Server) GC(ctx context.Context, minAge time.Duration, dryRun bool) (GCResult, error) {
	var res GCResult
	now := s.cfg.Now()
	err := s.raw.List(ctx, func(o rawstore.Info) error {
		res.Objects++
		id, _, _ := rawstore.ParseKey(o.Key)
		run, err := s.cfg.Store.GetRun(ctx, id)
		switch {
		case err == nil && run.RawPath == o.Key:
			res.Indexed++
			return nil
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return err
		}
		res.Orphans++
		if now.Sub(o.Modified) < minAge {
			res.Young++
			return nil
		}
		s.log.Info("raw object without an index row", "key", o.Key, "bytes", o.Size, "modified", o.Modified, "removed", !dryRun)
		if dryRun {
			return nil
		}
		if err := s.raw.Remove(ctx, o.Key); err != nil {
			return fmt.Errorf("remove %s: %w", o.Key, err)
		}
		res.Removed++
		return nil
	})
	return res, err
}
