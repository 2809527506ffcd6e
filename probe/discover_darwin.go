package probe

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"time"
)

func interfaceKind(ifc net.Interface) Kind {
	if ifc.Flags&net.FlagLoopback != 0 {
		return KindLoopback
	}
	if k, ok := hardwarePorts()[ifc.Name]; ok {
		return k
	}
	return darwinKindByName(ifc.Name)
}

func darwinKindByName(name string) Kind {
	switch {
	case strings.HasPrefix(name, "pdp_ip"):
		return KindCellular
	case strings.HasPrefix(name, "utun"), strings.HasPrefix(name, "ipsec"), strings.HasPrefix(name, "gif"), strings.HasPrefix(name, "stf"):
		return KindTunnel
	case strings.HasPrefix(name, "en"):
		return KindEthernet
	}
	return KindUnknown
}

func run(ctx context.Context, name string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	b, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		return ""
	}
	return string(b)
}

// hardwarePorts asks networksetup which device is Wi-Fi, Ethernet, iPhone USB.
func hardwarePorts() map[string]Kind {
	return parseHardwarePorts(run(context.Background(), "networksetup", "-listallhardwareports"))
}

func defaultRouteIfaces() map[string]bool {
	out := map[string]bool{}
	for _, fam := range []string{"-inet", "-inet6"} {
		text := run(context.Background(), "route", "-n", "get", fam, "default")
		for _, line := range strings.Split(text, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "interface:"); ok {
				out[strings.TrimSpace(v)] = true
			}
		}
	}
	return out
}

// osPerInterfaceDNS parses the scoped resolvers of `scutil --dns`.
func osPerInterfaceDNS(ctx context.Context, paths []Path) map[string][]DNSServer {
	scoped, _ := parseScutilDNS(run(ctx, "scutil", "--dns"))
	out := map[string][]DNSServer{}
	for iface, list := range scoped {
		out[iface] = servers(list, DNSSourceScutil, false)
	}
	return out
}

func sharedDNS() []DNSServer {
	_, global := parseScutilDNS(run(context.Background(), "scutil", "--dns"))
	return servers(global, DNSSourceScutil, true)
}
