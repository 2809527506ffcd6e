package run

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/mptester/mptester/patterns"
	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/probe"
)

// wrongPaths names each (server, path) pair whose traffic would not take
// the path it would be attributed to, so no result claims a path the
// packets did not use:
//   - a server on this host (an address of any interface) is reached over
//     loopback whatever path is asked for, unless the path is loopback;
//   - a source-bound transport (MPTCP: a device binding would pin every
//     subflow) is bound by source address only, so if the route from the
//     path's address to the server leaves by another interface, so do its
//     packets.
//
// Only servers given as addresses are checked here; a name is resolved
// per path later.
func wrongPaths(ctx context.Context, servers []string, paths []probe.Path, transports []string,
	local func(netip.Addr) bool, routeDev func(ctx context.Context, dst, src netip.Addr) (string, error)) []string {
	var out []string
	for _, s := range servers {
		ip, err := netip.ParseAddr(hostOnly(s))
		if err != nil {
			continue
		}
		ip = ip.Unmap()
		for _, p := range paths {
			if p.Kind == probe.KindLoopback {
				continue
			}
			if ip.IsLoopback() || local(ip) {
				out = append(out, fmt.Sprintf("server %s is an address of this host: its traffic goes over loopback, not %s", ip, p.Name))
				continue
			}
			src, ok := p.SourceAddr(probe.FamilyOf(ip))
			if !ok {
				continue
			}
			for _, name := range transports {
				if d, err := transport.Get(name); err != nil || !d.SourceBound {
					continue
				}
				dev, err := routeDev(ctx, ip, src)
				if err == nil && dev != "" && dev != p.Name {
					out = append(out, fmt.Sprintf("the route from %s (%s) to server %s leaves by %s: %s over %s would measure %s (mptester doctor shows the source policy routing to add; or leave %s out of --transports)",
						src, p.Name, ip, dev, name, p.Name, dev, name))
				}
			}
		}
	}
	return out
}

// statusWrongPath marks a test whose traffic did not take its path (a
// server name that resolved to this host, or an MPTCP route leaving by
// another interface): its figures belong to no path, never a success.
const statusWrongPath patterns.Status = "wrong-path"

// checkRecord relabels a test whose server address, as resolved on its
// path, sends the traffic elsewhere.
func checkRecord(ctx context.Context, paths []probe.Path, local func(netip.Addr) bool,
	routeDev func(ctx context.Context, dst, src netip.Addr) (string, error)) func(*patterns.Record) {
	return func(r *patterns.Record) {
		i := slices.IndexFunc(paths, func(p probe.Path) bool { return p.Name == r.Config.Path })
		if i < 0 || !r.Config.Server.IsValid() {
			return
		}
		if w := wrongPaths(ctx, []string{r.Config.Server.Addr().String()}, paths[i:i+1], []string{r.Config.Transport}, local, routeDev); len(w) > 0 {
			r.Status, r.Error = statusWrongPath, w[0]
		}
	}
}

// localAddrs reports whether an address belongs to an interface of this
// host.
func localAddrs() func(netip.Addr) bool {
	set := map[netip.Addr]bool{}
	if as, err := net.InterfaceAddrs(); err == nil {
		for _, a := range as {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok {
					set[ip.Unmap()] = true
				}
			}
		}
	}
	return func(a netip.Addr) bool { return set[a.Unmap()] }
}

func joinLines(ls []string) string { return strings.Join(ls, "; ") }
