//go:build !linux && !darwin && !windows

package probe

import (
	"context"
	"net"
)

func interfaceKind(ifc net.Interface) Kind {
	if ifc.Flags&net.FlagLoopback != 0 {
		return KindLoopback
	}
	return KindUnknown
}

func defaultRouteIfaces() map[string]bool { return map[string]bool{} }

func osPerInterfaceDNS(ctx context.Context, paths []Path) map[string][]DNSServer { return nil }

func sharedDNS() []DNSServer { return nil }
