package probe

import (
	"fmt"
	"net/netip"
	"strings"
)

// ParseDNSServer accepts "ADDR", "ADDR:PORT", "[V6]:PORT" and systemd's
// "ADDR#server-name" / "ADDR%ifindex" forms; the port defaults to 53.
func ParseDNSServer(s string) (netip.AddrPort, error) {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '#'); i >= 0 {
		s = s[:i]
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return netip.AddrPortFrom(ap.Addr().WithZone("").Unmap(), ap.Port()), nil
	}
	if i := strings.IndexByte(s, '%'); i >= 0 {
		s = s[:i]
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("invalid DNS server %q: want ADDR or ADDR:PORT", s)
	}
	return netip.AddrPortFrom(a.Unmap(), 53), nil
}

// parseServerList parses a space-separated list, skipping bad entries.
func parseServerList(v string) []netip.AddrPort {
	var out []netip.AddrPort
	for _, f := range strings.Fields(v) {
		if ap, err := ParseDNSServer(f); err == nil {
			out = append(out, ap)
		}
	}
	return out
}

// parseResolvConf returns the nameserver lines of a resolv.conf.
func parseResolvConf(text string) []netip.AddrPort {
	var out []netip.AddrPort
	for _, line := range strings.Split(text, "\n") {
		fs := strings.Fields(line)
		if len(fs) >= 2 && fs[0] == "nameserver" {
			if ap, err := ParseDNSServer(fs[1]); err == nil {
				out = append(out, ap)
			}
		}
	}
	return out
}

// parseNmcli parses `nmcli -t -f IP4.DNS,IP6.DNS device show IFACE`:
// "IP4.DNS[1]:192.0.2.1" / "IP6.DNS[1]:2001:db8::1".
func parseNmcli(text string) []netip.AddrPort {
	var out []netip.AddrPort
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || !strings.Contains(k, ".DNS") {
			continue
		}
		if ap, err := ParseDNSServer(strings.ReplaceAll(v, `\:`, ":")); err == nil {
			out = append(out, ap)
		}
	}
	return out
}

// ParseDNSFlag parses repeated --dns IFACE=ADDR[,ADDR] values.
func ParseDNSFlag(values []string) (map[string][]netip.AddrPort, error) {
	out := map[string][]netip.AddrPort{}
	for _, v := range values {
		iface, addrs, ok := strings.Cut(v, "=")
		if !ok || iface == "" || addrs == "" {
			return nil, fmt.Errorf("invalid --dns %q: want IFACE=ADDR", v)
		}
		for _, a := range strings.Split(addrs, ",") {
			ap, err := ParseDNSServer(a)
			if err != nil {
				return nil, fmt.Errorf("invalid --dns %q: %w", v, err)
			}
			out[iface] = append(out[iface], ap)
		}
	}
	return out, nil
}

// ParseDNSConfig converts the config file's dns section.
func ParseDNSConfig(m map[string][]string) (map[string][]netip.AddrPort, error) {
	out := map[string][]netip.AddrPort{}
	for iface, list := range m {
		for _, a := range list {
			ap, err := ParseDNSServer(a)
			if err != nil {
				return nil, fmt.Errorf("dns.%s: %w", iface, err)
			}
			out[iface] = append(out[iface], ap)
		}
	}
	return out, nil
}
