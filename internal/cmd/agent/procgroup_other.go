//go:build !unix

package agent

import (
	"os/exec"
	"time"
)

// inGroup: without process groups the command itself is killed at the
// end of its context (exec.CommandContext), its pipes closed after grace.
func inGroup(cmd *exec.Cmd, grace time.Duration) {
	cmd.WaitDelay = grace
}
