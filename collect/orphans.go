package collect

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mptester/mptester/collect/store"
)

// orphanGrace spares raw files younger than this: an upload between its
// rename and its index row (milliseconds) on a collector still serving.
const orphanGrace = 15 * time.Minute

// RemoveOrphans deletes the raw files of the data directory that no index
// row names: an upload cut off between its file and its row (a crash, a
// SIGKILL) was never acknowledged, so the probe still holds it and sends
// it again. It returns how many it removed.
func (s *Server) RemoveOrphans(ctx context.Context) (int, error) {
	return removeOrphans(ctx, s.cfg.Store, s.cfg.Data, s.cfg.Now().Add(-orphanGrace))
}

func removeOrphans(ctx context.Context, st store.Store, data string, before time.Time) (int, error) {
	dirs, err := filepath.Glob(filepath.Join(data, "raw", "*"))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return n, err
		}
		for _, e := range entries {
			id, _, ok := strings.Cut(e.Name(), ".")
			if !ok || !e.Type().IsRegular() || !runIDPattern.MatchString(id) {
				continue // temporaries (removed at start) and strangers
			}
			if fi, err := e.Info(); err != nil || fi.ModTime().After(before) {
				continue
			}
			rel := filepath.Join("raw", filepath.Base(dir), e.Name())
			run, err := st.GetRun(ctx, id)
			switch {
			case errors.Is(err, store.ErrNotFound):
			case err != nil:
				return n, err
			case run.RawPath == rel:
				continue
			}
			if err := os.Remove(filepath.Join(data, rel)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return n, err
			}
			n++
		}
	}
	return n, nil
}
