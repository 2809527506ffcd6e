package run

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"

	"github.com/mptester/mptester/probe/doctor"
	"os/exec"
)

// routeDev asks the kernel which interface a packet from src to dst leaves
// by (`ip -j route get DST from SRC`, policy rules included).
func routeDev(ctx context.Context, dst, src netip.Addr) (string, error) {
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

// mptcpEndpoints reads the kernel path manager's endpoints; nil when they
// cannot be read (no iproute2 MPTCP support): --backup is then taken as given.
func mptcpEndpoints(ctx context.Context) []doctor.MPTCPEndpoint {
	b, err := exec.CommandContext(ctx, "ip", "-j", "mptcp", "endpoint", "show").Output()
	if err != nil {
		return nil
	}
	eps, err := doctor.ParseEndpoints(b)
	if err != nil || eps == nil {
		return nil
	}
	return eps
}
