//go:build !windows

package up

import (
	"os/exec"
	"syscall"
)

// detach starts cmd in its own session: the lab outlives `lab up` and the
// terminal.
func detach(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} }
