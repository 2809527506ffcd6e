// Package cmdutil is what every command shares: I/O streams, the factory,
// config loading and the single mapping from errors to exit codes.
package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/mptester/mptester/internal/certs"
	"github.com/mptester/mptester/probe"
)

// Sentinel errors commands wrap so the exit code says what happened.
var (
	ErrUsage       = errors.New("usage error")         // bad flags, arguments or config
	ErrPartial     = errors.New("partial results")     // some measurements failed or the run was cut short
	ErrInvalid     = errors.New("measurement invalid") // the network changed during a test
	ErrPermission  = errors.New("permission denied")   // needs root or CAP_NET_RAW/CAP_NET_ADMIN
	ErrCheckFailed = errors.New("check failed")        // doctor or smoke checks failed
	ErrCancelled   = errors.New("cancelled")           // SIGINT/SIGTERM
	ErrSilent      = errors.New("silent error")        // already reported; just exit 1
	ErrNotUploaded = errors.New("not uploaded")        // measured and spooled, but the upload did not finish
	ErrRejected    = errors.New("results rejected")    // the collector refused results for good: moved to rejected/
)

// Exit codes, documented in README.md ("Exit codes"). This is the one place
// that maps errors to them.
const (
	ExitOK          = 0
	ExitError       = 1
	ExitUsage       = 2
	ExitPartial     = 3
	ExitInvalid     = 4
	ExitPermission  = 5
	ExitUnsupported = 6
	ExitCheckFailed = 7
	ExitNotUploaded = 8
	ExitPinMismatch = 9
	ExitRejected    = 10
	ExitCancelled   = 130
)

// MissingCapability is the error of an operation refused for want of a
// Linux capability (exit 5): it names the capability and how to grant it,
// so a service with a too-narrow unit fails saying what its unit lacks.
func MissingCapability(capability, what string, err error) error {
	return fmt.Errorf("%w: %s needs %s (%v): run as root, or grant it (systemd: AmbientCapabilities=%s; or setcap %s+ep on the binary)",
		ErrPermission, what, capability, err, capability, strings.ToLower(capability))
}

// ListenError maps a listener refused its port (EACCES: a port below
// net.ipv4.ip_unprivileged_port_start) to MissingCapability; other errors
// pass unchanged.
func ListenError(err error) error {
	if err == nil || !errors.Is(err, os.ErrPermission) {
		return err
	}
	start := "1024"
	if b, rerr := os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start"); rerr == nil {
		start = strings.TrimSpace(string(b))
	}
	return MissingCapability("CAP_NET_BIND_SERVICE", "listening on a port below "+start, err)
}

// ExitStatusError passes a child process's exit status through as ours
// (`lab exec`, `lab run`); the child already reported its own failure.
type ExitStatusError struct{ Code int }

func (e *ExitStatusError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// Unwrap makes it silent: nothing more to print.
func (e *ExitStatusError) Unwrap() error { return ErrSilent }

// ExitCode maps an error returned by a command to the process exit code.
func ExitCode(err error) int {
	var es *ExitStatusError
	if errors.As(err, &es) {
		return es.Code
	}
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrUsage):
		return ExitUsage
	case errors.Is(err, ErrCancelled), errors.Is(err, context.Canceled):
		return ExitCancelled
	case errors.Is(err, ErrPartial):
		return ExitPartial
	case errors.Is(err, ErrInvalid):
		return ExitInvalid
	case errors.Is(err, ErrPermission):
		return ExitPermission
	case errors.Is(err, probe.ErrUnsupported):
		return ExitUnsupported
	case errors.Is(err, ErrCheckFailed):
		return ExitCheckFailed
	case errors.Is(err, certs.ErrPinMismatch):
		return ExitPinMismatch
	case errors.Is(err, ErrNotUploaded):
		return ExitNotUploaded
	case errors.Is(err, ErrRejected):
		return ExitRejected
	}
	return ExitError
}
