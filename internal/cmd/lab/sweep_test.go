package lab_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSweepBadInput: a bad grid, flag or resume file is exit 2 with an
// error naming it, before any lab or output exists.
func TestSweepBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("paths: {wwan0: {loss: [\"0%\", \"150%\"]}}\nsizes: [1KiB]\ntransports: [tcp]\nprimaries: [wlan0]\nrepetitions: 1\n"), 0o644)
	notSweep := filepath.Join(dir, "old.jsonl")
	os.WriteFile(notSweep, []byte(`{"type":"pattern_test"}`+"\n"), 0o644)
	out := filepath.Join(dir, "out.jsonl")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--preset", "005"}, "unknown preset"},
		{[]string{"--quick"}, "--quick needs --preset"},
		{[]string{"--preset", "004-rtt", "--file", bad}, "exclude"},
		{[]string{"--file", bad}, "paths.wwan0.loss[1]"},
		{[]string{"--file", filepath.Join(dir, "none.yaml")}, "--file"},
		{[]string{"--preset", "004-rtt", "--transports", "mptcp,pigeon"}, "transports[1]"},
		{[]string{"--preset", "004-rtt", "--primaries", "eth0"}, "primaries[0]"},
		{[]string{"--preset", "004-rtt", "--reps", "0"}, "repetitions"},
		{[]string{"--sizes", "12 parsecs"}, "--sizes"},
		{[]string{"--wwan0-loss", "200%"}, "--wwan0-loss"},
		{[]string{"--wwan0-rtt", "fast"}, "--wwan0-rtt"},
		{[]string{"--preset", "004-rtt", "--resume", notSweep}, "unknown record type"},
		{[]string{"--preset", "004-rtt", "--resume", filepath.Join(dir, "missing.jsonl")}, "--resume"},
		{[]string{"--preset", "004-rtt", "--resume", out}, "names an input file"},
		{[]string{"--preset", "004-rtt", "--output", dir}, "is a directory"},
	} {
		code, stdout, stderr := run(t, append([]string{"lab", "sweep", "-o", out}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) || stdout != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want 2 naming %q", tc.args, code, stderr, stdout, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%v: output written", tc.args)
		}
	}
}
