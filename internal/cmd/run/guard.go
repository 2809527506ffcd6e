package run

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/mptester/mptester/internal/bogon"
	"github.com/mptester/mptester/probe"
)

// targetGuard is --no-private's check, made by every dial of the run (a
// dialer's ControlContext, or before QUIC is handed its address) on the
// address the path itself resolved: refused are the bogon table
// (private, loopback, link-local with the metadata service, CGNAT,
// reserved), IPv6 addresses that embed one (NAT64 under the well-known
// prefix or one the path discovered, IPv4-mapped or -compatible) and this
// host's own subnets, unless
// public names them. The host's subnets are listed once: failing to list
// them fails the run.
func targetGuard(public []string, nat64 map[string][]netip.Prefix) (probe.TargetGuard, error) {
	var pub []netip.Prefix
	for _, s := range public {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("--public-prefix: invalid prefix %q", s)
		}
		pub = append(pub, p.Masked())
	}
	local, err := bogon.LocalPrefixes()
	if err != nil {
		return nil, fmt.Errorf("--no-private: %w", err)
	}
	return func(p probe.Path, a netip.Addr) error {
		a = a.Unmap()
		if bogon.Private(a, pub, nat64[p.Name]) {
			return fmt.Errorf("%w: %s is a private or special-purpose address (--no-private, path %s)", probe.ErrTargetRefused, a, p.Name)
		}
		for _, l := range local {
			if l.Contains(a) && !publicHas(pub, a) {
				return fmt.Errorf("%w: %s is on this host's network %s (--no-private, path %s)", probe.ErrTargetRefused, a, l, p.Name)
			}
		}
		return nil
	}, nil
}

func publicHas(pub []netip.Prefix, a netip.Addr) bool {
	for _, p := range pub {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// pathNAT64 discovers each path's NAT64 prefixes (RFC 7050, through the
// path's own DNS servers): an address under one stands for the IPv4
// address it embeds. A path without DNS servers, or whose discovery
// fails, keeps the well-known prefix only (logged).
func pathNAT64(ctx context.Context, paths []probe.Path, logger *slog.Logger) map[string][]netip.Prefix {
	out := map[string][]netip.Prefix{}
	for name, d := range probe.DiscoverNAT64Paths(ctx, paths, time.Second) {
		if d.Err != nil && logger != nil {
			logger.Warn("--no-private: NAT64 prefix discovery failed; the well-known prefix only", "path", name, "err", d.Err)
		}
		out[name] = d.Prefixes
	}
	return out
}
