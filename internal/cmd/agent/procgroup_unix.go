//go:build unix

package agent

import (
	"os/exec"
	"syscall"
	"time"
)

// inGroup starts cmd in its own process group and makes the end of its
// context end the whole group: SIGTERM first (the measuring command
// flushes what it measured), SIGKILL after grace, so no child it started
// outlives the task's max_duration.
func inGroup(cmd *exec.Cmd, grace time.Duration) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		pgid := cmd.Process.Pid
		err := syscall.Kill(-pgid, syscall.SIGTERM)
		time.AfterFunc(grace, func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
		return err
	}
	cmd.WaitDelay = grace + time.Second
}
