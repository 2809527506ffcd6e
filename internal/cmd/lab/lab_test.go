package lab_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mptester/mptester/internal/cmd"
	"github.com/mptester/mptester/internal/cmdutil"
)

// The test binary doubles as mptester: `lab up` re-executes os.Executable()
// as the lab daemon, and with this variable set that child runs the CLI.
const envMain = "MPTESTER_LABCMD_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envMain) == "1" {
		os.Exit(cmd.Main())
	}
	os.Exit(m.Run())
}

// run executes the CLI in-process and returns exit code, stdout, stderr.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ios, out, errb := cmdutil.Test()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	code := cmd.Run(ctx, ios, args)
	return code, out.String(), errb.String()
}

func TestLabFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"lab", "up", "--name", "Bad Name"},
		{"lab", "up", "--wlan0", "delay=abc"},
		{"lab", "up", "--wwan0", "loss=150%"},
		{"lab", "up", "--domains", "-3"},
		{"lab", "up", "--world-share", "bogus=0.1"},
		{"lab", "up", "--world-share", "differ=2"},
		{"lab", "up", "--world-share", "differ"},
		{"lab", "up", "--world", "/nonexistent/world.json"},
		{"lab", "set", "--name", "x", "wlan9", "delay=1ms"},
		{"lab", "set", "--name", "x", "wlan0", "bogus=1"},
		{"lab", "set", "--name", "x", "wlan0", "block=udp/99999"},
		{"lab", "set", "--name", "x", "wlan0", "strip=tcp"},
		{"lab", "up", "--wlan0", "pmtu=1280"},
		{"lab", "up", "--wwan0", "v6=maybe"},
		{"lab", "exec", "--side", "moon", "--name", "x", "--", "true"},
	} {
		code, _, stderr := run(t, args...)
		if code != cmdutil.ExitUsage {
			t.Errorf("%v: exit %d, want %d (usage); stderr %s", args, code, cmdutil.ExitUsage, stderr)
		}
		if stderr == "" {
			t.Errorf("%v: no error message", args)
		}
	}
}

func TestLabStatusNotRunning(t *testing.T) {
	code, _, stderr := run(t, "lab", "status", "--dir", t.TempDir())
	if code != cmdutil.ExitError || !strings.Contains(stderr, "not running") {
		t.Errorf("status of no lab: exit %d, stderr %q; want 1 and 'not running'", code, stderr)
	}
}
