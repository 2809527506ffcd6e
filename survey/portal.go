package survey

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/mptester/mptester/probe"
)

// DetectPortals finds the paths held by a captive portal at survey start
// (probe.DetectPortal), so their part of the survey stops with that
// status instead of recording one portal address for every domain. It
// returns per stopped path what was measured.
func DetectPortals(ctx context.Context, paths []probe.Path, timeout time.Duration, log *slog.Logger) map[string]string {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		out = map[string]string{}
	)
	for _, p := range paths {
		if len(p.DNS) == 0 || !p.Up || p.Kind == probe.KindLoopback {
			continue
		}
		wg.Go(func() {
			if why := probe.DetectPortal(ctx, p, timeout); why != "" {
				log.Warn("captive portal: the path's part of the survey stops", "path", p.Name, "measured", why)
				mu.Lock()
				out[p.Name] = why
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}
