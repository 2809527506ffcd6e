package probe

import (
	"net/netip"
	"strings"
)

// parseScutilDNS parses macOS `scutil --dns`: resolvers under "for scoped
// queries" carry an if_index line naming their interface; the first
// unscoped resolver's servers are the system-wide ones.
func parseScutilDNS(text string) (scoped map[string][]netip.AddrPort, global []netip.AddrPort) {
	scoped = map[string][]netip.AddrPort{}
	inScoped, firstUnscoped := false, true
	var cur []netip.AddrPort
	iface := ""
	flush := func() {
		switch {
		case inScoped && iface != "":
			scoped[iface] = append(scoped[iface], cur...)
		case !inScoped && firstUnscoped && len(cur) > 0:
			global = cur
			firstUnscoped = false
		}
		cur, iface = nil, ""
	}
	for _, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		switch {
		case strings.HasPrefix(line, "DNS configuration"):
			flush()
			inScoped = strings.Contains(line, "scoped queries")
		case strings.HasPrefix(line, "resolver #"):
			flush()
		case strings.HasPrefix(line, "nameserver["):
			if _, v, ok := strings.Cut(line, ":"); ok {
				if ap, err := ParseDNSServer(v); err == nil {
					cur = append(cur, ap)
				}
			}
		case strings.HasPrefix(line, "if_index"):
			// "if_index : 6 (en0)"
			if i, j := strings.IndexByte(line, '('), strings.IndexByte(line, ')'); i >= 0 && j > i {
				iface = line[i+1 : j]
			}
		}
	}
	flush()
	return scoped, global
}

// parseHardwarePorts parses `networksetup -listallhardwareports`.
func parseHardwarePorts(text string) map[string]Kind {
	out := map[string]Kind{}
	port := ""
	for _, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if v, ok := strings.CutPrefix(line, "Hardware Port:"); ok {
			port = strings.ToLower(strings.TrimSpace(v))
			continue
		}
		if v, ok := strings.CutPrefix(line, "Device:"); ok {
			dev := strings.TrimSpace(v)
			switch {
			case strings.Contains(port, "wi-fi"), strings.Contains(port, "airport"):
				out[dev] = KindWiFi
			case strings.Contains(port, "iphone"), strings.Contains(port, "ipad"), strings.Contains(port, "wwan"), strings.Contains(port, "cellular"):
				out[dev] = KindCellular
			case strings.Contains(port, "ethernet"), strings.Contains(port, "lan"), strings.Contains(port, "thunderbolt"):
				out[dev] = KindEthernet
			case strings.Contains(port, "vpn"), strings.Contains(port, "tunnel"):
				out[dev] = KindTunnel
			}
		}
	}
	return out
}
