package cmd

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mptester/mptester/internal/cmdutil"
)

func TestExitCodesThroughRun(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("probe_id: x\nsurvey:\n  rate: 5\n  ratee: 6\n"), 0o644)
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"version"}, cmdutil.ExitOK, ""},
		{[]string{"--config", bad, "version"}, cmdutil.ExitUsage, "ratee"},
		{[]string{"--config", filepath.Join(dir, "missing.yaml"), "version"}, cmdutil.ExitUsage, "missing.yaml"},
		{[]string{"version", "--bogus"}, cmdutil.ExitUsage, "unknown flag"},
		{[]string{"version", "extra-arg"}, cmdutil.ExitUsage, "unknown command"},
		{[]string{"ifaces", "--dns", "nope"}, cmdutil.ExitUsage, "invalid --dns"},
	} {
		io, _, errOut := cmdutil.Test()
		code := Run(context.Background(), io, tc.args)
		assert.Equal(t, tc.code, code, "%v: %s", tc.args, errOut)
		assert.Contains(t, errOut.String(), tc.stderr, "%v", tc.args)
		if tc.stderr == "ratee" {
			assert.Contains(t, errOut.String(), bad, "the message names the file")
			assert.Contains(t, errOut.String(), bad+":4", "the message names the line")
		}
	}
}
