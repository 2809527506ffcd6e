package survey

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/mptester/mptester/probe"
)

// DetectPortals finds the paths held by a captive portal at survey start,
// so their part of the survey stops with that status instead of recording
// one portal address for every domain: two names that cannot exist (RFC
// 6761 .invalid) both resolve through the path's own DNS, and plain HTTP
// to the address they resolve to answers as a portal does
// (probe.CheckPortal). It returns per stopped path what was measured.
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
			if why := portalOf(ctx, p, timeout); why != "" {
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

// portalOf returns what shows a portal on p ("" when nothing does).
func portalOf(ctx context.Context, p probe.Path, timeout time.Duration) string {
	f := probe.Family4
	if _, ok := p.SourceAddr(f); !ok {
		f = probe.Family6
	}
	r, err := probe.NewResolver(p, probe.ResolverOptions{Timeout: timeout, Retries: 1})
	if err != nil {
		return ""
	}
	var (
		wg      sync.WaitGroup
		answers [2][]netip.Addr
	)
	for i := range answers {
		wg.Go(func() {
			b := make([]byte, 8)
			_, _ = rand.Read(b)
			answers[i] = r.Lookup(ctx, "mptester-"+hex.EncodeToString(b)+".invalid", f).Answers
		})
	}
	wg.Wait()
	if len(answers[0]) == 0 || len(answers[1]) == 0 {
		return "" // names that cannot exist do not resolve: no hijacking DNS
	}
	ap := netip.AddrPortFrom(answers[0][0], 80)
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	portal, detail := probe.CheckPortal(hctx, p, ap)
	if !portal {
		return ""
	}
	return fmt.Sprintf("portal: names that cannot exist resolve to %s; %s answers %s", answers[0][0], ap, detail)
}
