//go:build !linux

package patterns

import (
	"errors"
	"syscall"
)

// setMSS: clamping the MSS is Linux's here; elsewhere the pmtu-blackhole
// diagnosis is not made.
func setMSS(syscall.RawConn, int) error { return errors.New("TCP_MAXSEG is set on Linux only") }
