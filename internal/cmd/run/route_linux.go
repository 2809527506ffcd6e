package run

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
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
