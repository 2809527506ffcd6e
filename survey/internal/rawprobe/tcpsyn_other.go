//go:build !linux

package rawprobe

import (
	"context"
	"fmt"

	"github.com/mptester/mptester/probe"
)

// Raw TCP sockets do not receive TCP replies outside Linux.
func newSynProber(context.Context, probe.Path, Options) (Engine, error) {
	return nil, fmt.Errorf("tcp-syn (use --method tcp-connect): %w", probe.ErrUnsupported)
}
