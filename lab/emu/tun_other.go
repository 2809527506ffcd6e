//go:build !linux

package emu

import (
	"fmt"
	"os"

	"github.com/mptester/mptester/probe"
)

// OpenTUN is Linux only.
func OpenTUN(name string) (*os.File, error) {
	return nil, fmt.Errorf("open TUN %s: %w", name, probe.ErrUnsupported)
}
