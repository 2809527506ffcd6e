package survey

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmdutil"
)

// --resume refuses a file made with any setting that changes what a record
// means, naming the field; the output file is not created.
func TestSurveyResumeRefusesOtherSettings(t *testing.T) {
	server := startDNS(t)
	dir := t.TempDir()
	list := filepath.Join(dir, "list.csv")
	require.NoError(t, os.WriteFile(list, []byte("1,a.test\n2,b.test\n"), 0o644))
	old := filepath.Join(dir, "old.jsonl")
	base := []string{"--paths", "lo", "--dns", "lo=" + server, "--method", "tcp-connect", "--family", "4",
		"--port", "9", "--count", "2", "--timeout", "200ms", "--spacing", "0s", "--rate", "1000", "--top", "2"}
	_, _, err := runCLI(t, append([]string{"--list", list, "-o", old}, base...)...)
	require.NoError(t, err)

	set := func(flag, v string) []string {
		a := append([]string{"--list", list}, base...)
		for i := range a {
			if a[i] == flag {
				a[i+1] = v
				return a
			}
		}
		return append(a, flag, v)
	}
	other := filepath.Join(dir, "other.csv")
	require.NoError(t, os.WriteFile(other, []byte("1,b.test\n2,a.test\n"), 0o644))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{set("--port", "10"), "--port 9 in the file, 10 now"},
		{set("--count", "3"), "--count 2 in the file, 3 now"},
		{set("--top", "1"), "--top 2 in the file, 1 now"},
		{set("--method", "icmp"), "--method tcp-connect in the file, icmp now"},
		{set("--family", "both"), "--family 4 in the file, both now"},
		{set("--timeout", "300ms"), "--timeout 200ms in the file, 300ms now"},
		{set("--dns-timeout", "1s"), "--dns-timeout 2s in the file, 1s now"},
		{append([]string{"--list", other}, base...), "list sha256"},
	} {
		out := filepath.Join(dir, "new.jsonl")
		_, _, err := runCLI(t, append(tc.args, "--resume", old, "-o", out)...)
		require.Error(t, err, tc.want)
		assert.ErrorIs(t, err, cmdutil.ErrUsage)
		assert.Contains(t, err.Error(), tc.want)
		_, statErr := os.Stat(out)
		assert.True(t, os.IsNotExist(statErr), "the output was created")
	}

	// Two fields at once are both named.
	a := set("--port", "10")
	a = append(a, "--count", "3", "--resume", old, "-o", filepath.Join(dir, "new.jsonl"))
	_, _, err = runCLI(t, a...)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--port")
	assert.Contains(t, err.Error(), "--count")

	// The same settings continue.
	_, _, err = runCLI(t, append([]string{"--list", list, "--resume", old, "-o", filepath.Join(dir, "ok.jsonl")}, base...)...)
	require.NoError(t, err)

	// A file with no readable header is refused, not treated as a fresh start.
	for _, body := range []string{"", "garbage\n", `{"type":"resolution","domain":"a.test"}` + "\n",
		`{"type":"header","command":"run","config":{}}` + "\n"} {
		bad := filepath.Join(dir, "bad.jsonl")
		require.NoError(t, os.WriteFile(bad, []byte(body), 0o644))
		_, _, err = runCLI(t, append([]string{"--list", list, "--resume", bad, "-o", filepath.Join(dir, "x.jsonl")}, base...)...)
		require.Error(t, err, "%q", body)
		assert.ErrorIs(t, err, cmdutil.ErrUsage)
		assert.True(t, strings.Contains(err.Error(), "header") || strings.Contains(err.Error(), "not a survey"), err.Error())
	}
}

// The paths are compared as a set.
func TestCheckResumePaths(t *testing.T) {
	old := resumeKey{paths: []string{"wlan0", "wwan0"}}
	assert.NoError(t, checkResume(old, resumeKey{paths: []string{"wwan0", "wlan0"}}))
	err := checkResume(old, resumeKey{paths: []string{"wlan0"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--paths wlan0,wwan0 in the file, wlan0 now")
}
