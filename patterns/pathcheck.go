package patterns

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/probe/doctor"
)

// StatusWrongPath marks a test whose traffic did not take its path (a
// server name that resolved to this host, or an MPTCP route leaving by
// another interface): its figures belong to no path, never a success.
const StatusWrongPath Status = "wrong-path"

// RouteDevFunc names the interface a packet from src to dst leaves by
// (probe.RouteDev asks the kernel).
type RouteDevFunc func(ctx context.Context, dst, src netip.Addr) (string, error)

// HostRoles reconciles backup (--backup) with the host for the transports
// that take roles from it (HostRoles: MPTCP's backup flag lives on the
// kernel's endpoints, for every connection of the host). Without backup
// the roles are the host's, so the results name what the kernel really
// did; with it, a path whose endpoint says otherwise is a problem that
// gives the command that makes the host agree. eps nil: no such transport
// selected, or the endpoints could not be read (then backup is taken as
// given).
func HostRoles(transports, backup []string, paths []probe.Path, eps []doctor.MPTCPEndpoint) (roles, problems []string) {
	host := slices.ContainsFunc(transports, func(n string) bool {
		d, err := transport.Get(n)
		return err == nil && d.HostRoles
	})
	if !host || eps == nil {
		return backup, nil
	}
	var kernel []string
	for _, p := range paths {
		ep, ok := endpointOf(p, eps)
		if !ok {
			continue // no endpoint: MPTCP opens no subflow there (doctor says so)
		}
		if ep.Backup {
			kernel = append(kernel, p.Name)
		}
		if backup == nil {
			continue
		}
		want := slices.Contains(backup, p.Name)
		switch {
		case want && !ep.Backup:
			problems = append(problems, fmt.Sprintf("%s is not a backup path for MPTCP on this host: ip mptcp endpoint change id %d backup", p.Name, ep.ID))
		case !want && ep.Backup:
			problems = append(problems, fmt.Sprintf("%s is a backup path for MPTCP on this host: ip mptcp endpoint change id %d nobackup (or add it to --backup)", p.Name, ep.ID))
		}
	}
	if backup == nil {
		return kernel, nil
	}
	return backup, problems
}

// endpointOf is the path's endpoint: its device, or one of its addresses.
func endpointOf(p probe.Path, eps []doctor.MPTCPEndpoint) (doctor.MPTCPEndpoint, bool) {
	for _, ep := range eps {
		if ep.Dev != "" && ep.Dev == p.Name {
			return ep, true
		}
		a, err := netip.ParseAddr(ep.Address)
		if err != nil {
			continue
		}
		for _, pa := range p.Addrs {
			if pa.IP == a.Unmap() {
				return ep, true
			}
		}
	}
	return doctor.MPTCPEndpoint{}, false
}

// WrongPaths names each (server, path) pair whose traffic would not take
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
// per path later (CheckRecord).
func WrongPaths(ctx context.Context, servers []string, paths []probe.Path, transports []string,
	local func(netip.Addr) bool, routeDev RouteDevFunc) []string {
	var out []string
	for _, s := range servers {
		ip, err := netip.ParseAddr(ServerHost(s))
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

// CheckRecord relabels StatusWrongPath a test whose server address, as
// resolved on its path, sends the traffic elsewhere (RunOptions.Check).
func CheckRecord(ctx context.Context, paths []probe.Path, local func(netip.Addr) bool, routeDev RouteDevFunc) func(*Record) {
	return func(r *Record) {
		i := slices.IndexFunc(paths, func(p probe.Path) bool { return p.Name == r.Config.Path })
		if i < 0 || !r.Config.Server.IsValid() {
			return
		}
		if w := WrongPaths(ctx, []string{r.Config.Server.Addr().String()}, paths[i:i+1], []string{r.Config.Transport}, local, routeDev); len(w) > 0 {
			r.Status, r.Error = StatusWrongPath, w[0]
		}
	}
}

// ServerHost is the host of a --server value: HOST, HOST:PORT, [V6] or
// [V6]:PORT (a bare IPv6 address stays whole).
func ServerHost(s string) string {
	if i := strings.LastIndex(s, ":"); i > 0 && !strings.HasSuffix(s, "]") && strings.Count(s, ":") == 1 {
		return s[:i]
	}
	if strings.HasPrefix(s, "[") {
		if i := strings.Index(s, "]"); i > 0 {
			return s[1:i]
		}
	}
	return s
}
