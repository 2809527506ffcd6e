package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"runtime"
)

// RouteDev asks the kernel which interface a packet from src to dst leaves
// by (`ip -j route get DST from SRC`, policy rules included). Outside Linux
// it is not asked ("", nil): only MPTCP, Linux only, binds by source
// address.
func RouteDev(ctx context.Context, dst, src netip.Addr) (string, error) {
	if runtime.GOOS != "linux" {
		return "", nil
	}
	b, err := exec.CommandContext(ctx, "ip", "-j", "route", "get", dst.String(), "from", src.String()).Output()
	if err != nil {
		return "", fmt.Errorf("ip route get %s from %s: %w", dst, src, err)
	}
	var rs []struct {
		Dev string `json:"dev"`
	}
	if err := json.Unmarshal(b, &rs); err != nil || len(rs) == 0 {
		return "", fmt.Errorf("ip route get %s from %s: unreadable answer", dst, src)
	}
	return rs[0].Dev, nil
}

// LocalAddrs reports whether an address belongs to an interface of this
// host (the addresses as they are now).
func LocalAddrs() func(netip.Addr) bool {
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
