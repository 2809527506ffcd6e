package probe

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
)

// DiscoverOptions carries the DNS servers the user named; they override
// whatever the OS reports for that interface.
type DiscoverOptions struct {
	// FlagDNS comes from --dns IFACE=ADDR (highest precedence).
	FlagDNS map[string][]netip.AddrPort
	// ConfigDNS comes from the config file's dns section.
	ConfigDNS map[string][]netip.AddrPort
}

// Discover lists every interface of the host as a Path, with its kind,
// addresses, default route and per-path DNS servers.
func Discover(ctx context.Context, opts DiscoverOptions) ([]Path, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	defRoutes := defaultRouteIfaces()
	paths := make([]Path, 0, len(ifs))
	for _, ifc := range ifs {
		p := Path{Name: ifc.Name, Index: ifc.Index, MTU: ifc.MTU, Up: ifc.Flags&net.FlagUp != 0,
			Flags: flagNames(ifc.Flags), Addrs: []Addr{}, DNS: []DNSServer{}}
		if addrs, err := ifc.Addrs(); err == nil {
			for _, a := range addrs {
				ipn, ok := a.(*net.IPNet)
				if !ok {
					continue
				}
				ip, ok := netip.AddrFromSlice(ipn.IP)
				if !ok {
					continue
				}
				ip = ip.Unmap()
				ones, _ := ipn.Mask.Size()
				p.Addrs = append(p.Addrs, Addr{IP: ip, PrefixLen: ones, Scope: ScopeOf(ip)})
			}
		}
		p.Kind = interfaceKind(ifc)
		p.DefaultRoute = defRoutes[ifc.Name]
		paths = append(paths, p)
	}
	attachDNS(ctx, paths, opts)
	return paths, nil
}

func flagNames(f net.Flags) []string {
	names := []string{}
	for _, fl := range []struct {
		f net.Flags
		n string
	}{{net.FlagUp, "up"}, {net.FlagBroadcast, "broadcast"}, {net.FlagLoopback, "loopback"},
		{net.FlagPointToPoint, "pointtopoint"}, {net.FlagMulticast, "multicast"}, {net.FlagRunning, "running"}} {
		if f&fl.f != 0 {
			names = append(names, fl.n)
		}
	}
	return names
}

// attachDNS fills p.DNS for every path, by precedence: flag > config >
// OS per-interface sources > resolv.conf (shared by every path).
func attachDNS(ctx context.Context, paths []Path, opts DiscoverOptions) {
	osDNS := osPerInterfaceDNS(ctx, paths)
	shared := sharedDNS()
	for i := range paths {
		p := &paths[i]
		switch {
		case len(opts.FlagDNS[p.Name]) > 0:
			p.DNS = servers(opts.FlagDNS[p.Name], DNSSourceFlag, false)
		case len(opts.ConfigDNS[p.Name]) > 0:
			p.DNS = servers(opts.ConfigDNS[p.Name], DNSSourceConfig, false)
		case len(osDNS[p.Name]) > 0:
			p.DNS = slices.Clone(osDNS[p.Name])
		case p.Kind != KindLoopback && len(shared) > 0:
			p.DNS = slices.Clone(shared)
		}
		if len(opts.FlagDNS[p.Name]) == 0 {
			// One choice for every command: a server of a family the path
			// has no address of (resolv.conf's IPv4 server on an IPv6-only
			// path) cannot be asked through it, so ifaces does not list it
			// and survey does not try it. Flag values are kept: the
			// command reports them as a mistake.
			p.DNS = slices.DeleteFunc(p.DNS, func(s DNSServer) bool { return !p.Reaches(s.Addr.Addr()) })
		}
	}
}

// Reaches reports whether the path has a source address of a's family, so
// that a packet to a can leave through it.
func (p Path) Reaches(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	_, ok := p.SourceAddr(FamilyOf(a))
	return ok
}

func servers(addrs []netip.AddrPort, source string, shared bool) []DNSServer {
	out := make([]DNSServer, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, DNSServer{Addr: a, Source: source, Shared: shared})
	}
	return out
}
