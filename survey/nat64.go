package survey

import (
	"context"
	"log/slog"
	"net/netip"
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
	var asked []probe.Path
	for _, p := range paths {
		if p.Up && p.Kind != probe.KindLoopback {
			asked = append(asked, p)
		}
	}
	out := map[string]netip.Prefix{}
	for name, d := range probe.DiscoverNAT64Paths(ctx, asked, timeout) {
		switch {
		case d.Err != nil:
			log.Warn("NAT64 discovery failed: the path is taken as without translator", "path", name, "err", d.Err)
		case len(d.Prefixes) > 0:
			log.Info("NAT64 prefix discovered", "path", name, "prefix", d.Prefixes[0], "all", d.Prefixes)
			out[name] = d.Prefixes[0]
		}
	}
	return out
}
