//go:build !linux

package transport

import "net/netip"

func subflowFlags(local, remote netip.AddrPort, ifindex int) (uint32, error) {
	return 0, errNoSubflowFlags
}
