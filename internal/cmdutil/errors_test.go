package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mptester/mptester/probe"
)

// The documented table in README.md ("Exit codes") must match this mapping.
func TestExitCode(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("survey: %w", err) }
	for err, want := range map[error]int{
		nil:                        0,
		errors.New("boom"):         1,
		wrap(ErrUsage):             2,
		wrap(ErrPartial):           3,
		wrap(ErrInvalid):           4,
		wrap(ErrPermission):        5,
		wrap(probe.ErrUnsupported): 6,
		wrap(ErrCheckFailed):       7,
		wrap(ErrNotUploaded):       8,
		wrap(ErrCancelled):         130,
		wrap(context.Canceled):     130,
		wrap(ErrSilent):            1,
		wrap(MissingCapability("CAP_NET_RAW", "raw sockets", syscall.EPERM)): 5,
	} {
		assert.Equal(t, want, ExitCode(err), "%v", err)
	}
}
