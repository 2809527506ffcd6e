//go:build !linux

package survey

import (
	"context"
	"fmt"

	"github.com/mptester/mptester/probe"
)

// Raw TCP sockets do not receive TCP replies outside Linux.
func newSynProber(context.Context, probe.Path, ProberOptions) (Prober, error) {
	return nil, fmt.Errorf("tcp-syn (use --method tcp-connect): %w", probe.ErrUnsupported)
}
