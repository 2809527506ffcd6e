//go:build linux

package agent

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTaskGroupKilled: a task's command that started a child of its own
// is ended with that child when the task's context ends (max_duration):
// nothing it started outlives it.
func TestTaskGroupKilled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "sh", "-c", "trap '' TERM; sleep 300 & echo $!; wait")
	inGroup(cmd, 200*time.Millisecond)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	child, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err)
	cancel()
	_ = cmd.Wait()
	// The child is gone or a zombie waiting for init to reap it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, err := os.ReadFile("/proc/" + strconv.Itoa(child) + "/stat")
		if err != nil || strings.Contains(string(st), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task's child %d outlived it: %s", child, st)
		}
	}
}
