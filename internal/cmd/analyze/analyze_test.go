package analyze

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmdutil"
)

const scenario = "../../../pcapanalysis/testdata/scenario.pcap"

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ios, out, _ := cmdutil.Test()
	cmd := NewCmdAnalyze(&cmdutil.Factory{IO: ios}, nil)
	cmd.SetArgs(args)
	cmd.SetContext(context.Background())
	err := cmd.Execute()
	return out.String(), err
}

func TestAnalyzeFormats(t *testing.T) {
	out, err := run(t, scenario)
	require.NoError(t, err)
	assert.Contains(t, out, "1 MPTCP (0 used one path only, 1 with reinjections, 2000 bytes reinjected), 2 TCP, 2 QUIC on 3 paths")

	out, err = run(t, "--format", "csv", scenario)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	assert.Len(t, lines, 1+3+1+1, "header, three subflows, two TCP connections")

	dir := t.TempDir()
	b, err := os.ReadFile(scenario)
	require.NoError(t, err)
	for _, n := range []string{"a.pcap", "b.pcap", "notes.txt"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), b, 0o644))
	}
	o := filepath.Join(dir, "out.json")
	_, err = run(t, "--format", "json", "-o", o, dir)
	require.NoError(t, err)
	j, err := os.ReadFile(o)
	require.NoError(t, err)
	assert.Equal(t, 2, bytes.Count(j, []byte(`"file":`)), "one report per capture in the directory")
}

// TestAnalyzeTruncatedCapture: a capture cut inside its last packet is
// analysed up to the cut with a warning on stderr and in the JSON, exit 0;
// --strict refuses it before any output is written.
func TestAnalyzeTruncatedCapture(t *testing.T) {
	b, err := os.ReadFile(scenario)
	require.NoError(t, err)
	dir := t.TempDir()
	cut := filepath.Join(dir, "cut.pcap")
	require.NoError(t, os.WriteFile(cut, b[:len(b)-10], 0o644))

	ios, out, errOut := cmdutil.Test()
	cmd := NewCmdAnalyze(&cmdutil.Factory{IO: ios}, nil)
	cmd.SetArgs([]string{"--format", "json", cut})
	cmd.SetContext(context.Background())
	require.NoError(t, cmd.Execute())
	assert.Contains(t, errOut.String(), "cut.pcap: warning: packet 65: capture truncated inside this packet")
	assert.Contains(t, out.String(), `"packets": 64`)
	assert.Contains(t, out.String(), `"warnings": [`+"\n"+`    "packet 65: capture truncated`)

	o := filepath.Join(dir, "out.json")
	_, err = run(t, "--strict", "-o", o, cut)
	require.Error(t, err)
	assert.ErrorIs(t, err, cmdutil.ErrUsage)
	assert.Contains(t, err.Error(), "packet 65: capture truncated")
	assert.NoFileExists(t, o)
}
