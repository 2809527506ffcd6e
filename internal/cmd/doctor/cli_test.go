package doctor_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmd"
	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/report"
)

// TestCLIJSONOnThisHost runs `mptester doctor --json` through the real
// command tree on the real host: whatever the host's state, the output is
// a valid envelope of check records and the exit code follows them.
func TestCLIJSONOnThisHost(t *testing.T) {
	ios, out, errOut := cmdutil.Test()
	code := cmd.Run(context.Background(), ios, []string{"doctor", "--json"})
	require.NoError(t, report.ValidateDocument(out.Bytes()), "stdout:\n%s\nstderr:\n%s", out, errOut)

	var doc struct {
		Records []struct {
			Type   string `json:"type"`
			ID     string `json:"id"`
			Status string `json:"status"`
			Fix    string `json:"fix"`
		} `json:"records"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
	require.NotEmpty(t, doc.Records)
	failed := false
	for _, r := range doc.Records {
		assert.Equal(t, "check", r.Type)
		assert.NotEmpty(t, r.ID)
		assert.Contains(t, []string{"ok", "warn", "fail"}, r.Status, r.ID)
		failed = failed || r.Status == "fail"
	}
	want := cmdutil.ExitOK
	if failed {
		want = cmdutil.ExitCheckFailed
	}
	assert.Equal(t, want, code, "stderr: %s", errOut)
}
