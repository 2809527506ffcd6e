//go:build !linux

package run

import (
	"context"
	"net/netip"
)

// routeDev is not asked outside Linux (MPTCP is Linux only).
func routeDev(context.Context, netip.Addr, netip.Addr) (string, error) { return "", nil }
