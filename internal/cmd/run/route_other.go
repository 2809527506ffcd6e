//go:build !linux

package run

import (
	"context"
	"net/netip"

	"github.com/mptester/mptester/probe/doctor"
)

// routeDev is not asked outside Linux (MPTCP is Linux only).
func routeDev(context.Context, netip.Addr, netip.Addr) (string, error) { return "", nil }

// mptcpEndpoints: MPTCP is Linux only.
func mptcpEndpoints(context.Context) []doctor.MPTCPEndpoint { return nil }
