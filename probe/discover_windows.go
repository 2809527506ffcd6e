package probe

import (
	"context"
	"net"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/windows"
)

// adapter is what GetAdaptersAddresses tells about one interface.
type adapter struct {
	kind    Kind
	gateway bool
	dns     []netip.AddrPort
}

const (
	ifTypeEthernet = 6
	ifTypePPP      = 23
	ifTypeLoopback = 24
	ifTypeWiFi     = 71
	ifTypeTunnel   = 131
	ifTypeWWANPP   = 243
	ifTypeWWANPP2  = 244
)

// adapters indexes GetAdaptersAddresses by friendly name, which is the name
// net.Interfaces reports on Windows.
func adapters() map[string]adapter {
	out := map[string]adapter{}
	size := uint32(15000)
	var buf []byte
	for range 3 {
		buf = make([]byte, size)
		err := windows.GetAdaptersAddresses(windows.AF_UNSPEC, windows.GAA_FLAG_INCLUDE_GATEWAYS,
			0, (*windows.IpAdapterAddresses)(unsafe.Pointer(&buf[0])), &size)
		if err == nil {
			break
		}
		if err != windows.ERROR_BUFFER_OVERFLOW {
			return out
		}
	}
	for aa := (*windows.IpAdapterAddresses)(unsafe.Pointer(&buf[0])); aa != nil; aa = aa.Next {
		a := adapter{kind: KindUnknown, gateway: aa.FirstGatewayAddress != nil}
		switch aa.IfType {
		case ifTypeWiFi:
			a.kind = KindWiFi
		case ifTypeWWANPP, ifTypeWWANPP2:
			a.kind = KindCellular
		case ifTypeEthernet:
			a.kind = KindEthernet
		case ifTypeLoopback:
			a.kind = KindLoopback
		case ifTypeTunnel, ifTypePPP:
			a.kind = KindTunnel
		}
		for d := aa.FirstDnsServerAddress; d != nil; d = d.Next {
			if ip, ok := netip.AddrFromSlice(d.Address.IP()); ok {
				a.dns = append(a.dns, netip.AddrPortFrom(ip.Unmap(), 53))
			}
		}
		out[windows.UTF16PtrToString(aa.FriendlyName)] = a
	}
	return out
}

func interfaceKind(ifc net.Interface) Kind {
	if ifc.Flags&net.FlagLoopback != 0 {
		return KindLoopback
	}
	return adapters()[ifc.Name].kind
}

func defaultRouteIfaces() map[string]bool {
	out := map[string]bool{}
	for name, a := range adapters() {
		out[name] = a.gateway
	}
	return out
}

// osPerInterfaceDNS: Windows configures DNS per adapter.
func osPerInterfaceDNS(ctx context.Context, paths []Path) map[string][]DNSServer {
	out := map[string][]DNSServer{}
	for name, a := range adapters() {
		if len(a.dns) > 0 {
			out[name] = servers(a.dns, DNSSourceAdapter, false)
		}
	}
	return out
}

func sharedDNS() []DNSServer { return nil }
