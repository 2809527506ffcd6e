package survey

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/mptester/mptester/probe"
)

// DiscoverNAT64 finds each path's NAT64 prefix by RFC 7050 discovery
// (one AAAA query for ipv4only.arpa through the path's own resolvers), at
// survey start, for Policy.NAT64. A path without DNS, loopback, or whose
// discovery fails has none (a failure is logged: the survey then treats
// the path as without translator). Of several prefixes the first is used.
func DiscoverNAT64(ctx context.Context, paths []probe.Path, timeout time.Duration, log *slog.Logger) map[string]netip.Prefix {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		out = map[string]netip.Prefix{}
	)
	for _, p := range paths {
		if len(p.DNS) == 0 || !p.Up || p.Kind == probe.KindLoopback {
			continue
		}
		wg.Go(func() {
			r, err := probe.NewResolver(p, probe.ResolverOptions{Timeout: timeout, Retries: 1})
			if err != nil {
				log.Warn("NAT64 discovery: no resolver", "path", p.Name, "err", err)
				return
			}
			pfx, err := probe.DiscoverNAT64(ctx, r)
			if err != nil {
				log.Warn("NAT64 discovery failed: the path is taken as without translator", "path", p.Name, "err", err)
				return
			}
			if len(pfx) > 0 {
				log.Info("NAT64 prefix discovered", "path", p.Name, "prefix", pfx[0], "all", pfx)
				mu.Lock()
				out[p.Name] = pfx[0]
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}
