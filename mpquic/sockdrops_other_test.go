//go:build !linux

package mpquic

import (
	"net"
	"testing"
)

// socketDrops: no per-socket drop counter read here (Linux only).
func socketDrops(*testing.T, net.PacketConn) (uint64, bool) { return 0, false }
