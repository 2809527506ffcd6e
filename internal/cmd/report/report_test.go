package report

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmdutil"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// inputs: a hand-made survey whose tables are worked out in the comments
// of TestGoldenSurveyValues, a run document of the 1.0 binary, and a
// planted 1.1 document with IPv4/IPv6 interactive and bulk pairs and a
// mobile_summary (mobile mode's shape; planted, not measured).
var inputs = []string{"testdata/survey.jsonl", "testdata/run-v1.0.json", "testdata/mobile-v1.1.json"}

func execute(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	ios, out, errOut := cmdutil.Test()
	cmd := NewCmdReport(&cmdutil.Factory{IO: ios}, nil)
	cmd.SetArgs(args)
	cmd.SetOut(errOut)
	cmd.SetErr(errOut)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", "golden", name)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(got), 0o644))
	}
	want, err := os.ReadFile(p)
	require.NoError(t, err, "run go test ./internal/cmd/report -update")
	assert.Equal(t, string(want), got, "%s differs; if the change is meant, run go test ./internal/cmd/report -update", name)
}

func TestGolden(t *testing.T) {
	for _, tc := range []struct{ name, format string }{{"report.txt", "text"}, {"report.md", "md"}, {"report.json", "json"}} {
		out, _, err := execute(t, append([]string{"--format", tc.format}, inputs...)...)
		require.NoError(t, err)
		golden(t, tc.name, out)
	}
	dir := t.TempDir()
	_, _, err := execute(t, append([]string{"--format", "csv", "--out-dir", dir}, inputs...)...)
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join(dir, "*.csv"))
	require.NoError(t, err)
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		names = append(names, filepath.Base(f))
		golden(t, filepath.Base(f), string(b))
	}
	assert.Equal(t, []string{"comparisons.csv", "family-pairs-cdf.csv", "family-pairs.csv", "family-ratio.csv", "findings.csv", "handover-duration-cdf.csv",
		"inputs.csv", "interactive-cdf.csv", "max-delay-cdf.csv", "mobile-causes.csv", "mobile-ratio-cdf.csv", "mobile-status.csv",
		"overlap.csv", "path-bytes.csv", "pattern-metrics.csv", "pattern-status.csv", "provenance.csv", "records.csv",
		"resolution.csv", "rtt-cdf.csv", "rtt.csv", "survey-bytes.csv", "unresponsive.csv"}, names)
}

// TestGoldenSurveyValues pins the hand-made survey's tables to values
// worked out by hand, so an -update cannot bless a wrong number:
// wlan0 resolves 198.18.10.1, .10.2, .10.3 and 2001:db8::3 (4 targets;
// .10.3 silent from wlan0), wwan0 resolves .10.1 and .20.2; overlap 1 of
// 5 = 20%; of 3 domains b differs and c fails on wwan0 (33.33% each).
func TestGoldenSurveyValues(t *testing.T) {
	out, _, err := execute(t, "--format", "csv", "--section", "unresponsive", inputs[0])
	require.NoError(t, err)
	assert.Equal(t, "cell,targets,responsive,unresponsive,unresponsive_pct,host_overloaded,invalid,study_cell\n"+
		"wlan0/wlan0,4,3,1,25.00,0,0,WW\nwlan0/wwan0,2,2,0,0.00,0,0,WL\nwwan0/wlan0,4,3,1,25.00,0,0,LW\nwwan0/wwan0,2,2,0,0.00,0,0,LL\n", out)
	out, _, err = execute(t, "--format", "csv", "--section", "overlap", inputs[0])
	require.NoError(t, err)
	assert.Equal(t, "run,path_a,path_b,ips_a,ips_b,ips_common,overlap_pct,domains,domains_differ_pct,unresolved_somewhere_pct\n"+
		"33333333,wlan0,wwan0,4,2,1,20.00,3,33.33,33.33\n", out)
	// Domain RTTs: wlan0/wlan0 a 20 b 24 c 31; wlan0/wwan0 a 20 b 66;
	// wwan0/wlan0 a 60 b 64 c 70; wwan0/wwan0 a 60 b 50.
	out, _, err = execute(t, "--format", "csv", "--section", "comparisons", inputs[0])
	require.NoError(t, err)
	assert.Contains(t, out, "wlan0/wlan0,wlan0/wwan0,2,-21.000,0.00\n")
	assert.Contains(t, out, "wlan0/wlan0,wwan0/wlan0,3,-39.667,0.00\n")
	assert.Contains(t, out, "wwan0/wlan0,wwan0/wwan0,2,7.000,50.00\n")
	// 3 resolution records of 80 bytes and 5 probe records of 180 per path.
	out, _, err = execute(t, "--format", "csv", "--section", "survey-bytes", inputs[0])
	require.NoError(t, err)
	assert.Equal(t, "run,path,dns_bytes,probe_bytes,total_bytes\n33333333,wlan0,240,900,1140\n33333333,wwan0,240,900,1140\n", out)
	out, _, err = execute(t, "--format", "csv", "--section", "rtt-cdf", inputs[0])
	require.NoError(t, err)
	assert.Contains(t, out, "wlan0/wwan0,20.000,0.500000\nwlan0/wwan0,66.000,1.000000\n")
}

// TestBadInputExit2OutputUntouched: a bad file fails with exit 2, naming
// file and line, and the output file keeps its content.
func TestBadInputExit2OutputUntouched(t *testing.T) {
	dir := t.TempDir()
	outFile := filepath.Join(dir, "report.txt")
	require.NoError(t, os.WriteFile(outFile, []byte("before"), 0o644))
	b, err := os.ReadFile(inputs[0])
	require.NoError(t, err)
	lines := strings.SplitAfter(string(b), "\n")
	lines[4] = "{not json\n"
	bad := filepath.Join(dir, "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte(strings.Join(lines, "")), 0o644))
	for _, args := range [][]string{
		{"-o", outFile, inputs[0], bad},
		{"-o", outFile, inputs[0], filepath.Join(dir, "missing.jsonl")},
		{"-o", outFile, "--format", "pdf", inputs[0]},
		{"-o", outFile, "--svg", filepath.Join(outFile, "sub"), inputs[0]},
		{"-o", outFile, "--format", "csv", inputs[0]},
		{"-o", outFile, "--section", "nope", inputs[0]},
		{"-o", inputs[0], inputs[0]},
	} {
		_, _, err := execute(t, args...)
		require.Error(t, err, args)
		assert.Equal(t, cmdutil.ExitUsage, cmdutil.ExitCode(err), "%v: %v", args, err)
		got, _ := os.ReadFile(outFile)
		assert.Equal(t, "before", string(got), args)
	}
	_, _, err = execute(t, inputs[0], bad)
	assert.ErrorContains(t, err, "bad.jsonl:5: not JSON")
}

func TestTruncatedRunIsShown(t *testing.T) {
	b, err := os.ReadFile(inputs[0])
	require.NoError(t, err)
	lines := strings.SplitAfter(string(b), "\n")
	p := filepath.Join(t.TempDir(), "cut.jsonl")
	require.NoError(t, os.WriteFile(p, []byte(strings.Join(lines[:6], "")+lines[6][:10]), 0o644))
	out, _, err := execute(t, "--format", "csv", "--section", "inputs", p)
	require.NoError(t, err)
	assert.Contains(t, out, `"truncated: line 7 cut mid-write, no trailer",5`+"\n")
}

func TestWritesOutputFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "r.md")
	out, _, err := execute(t, "--format", "md", "-o", p, inputs[0])
	require.NoError(t, err)
	assert.Empty(t, out)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(b, []byte("## Findings\n")), "the answer first")
	assert.Contains(t, string(b), "## Provenance\n")
}

// TestOutDirCreated: --out-dir, --svg and --png create a directory that
// does not exist yet (after the inputs were read: a bad input leaves none),
// and refuse one whose place holds a file.
func TestOutDirCreated(t *testing.T) {
	base := t.TempDir()
	tables := filepath.Join(base, "new", "tables")
	svg := filepath.Join(base, "figs")
	_, _, err := execute(t, append([]string{"--format", "csv", "--out-dir", tables, "--svg", svg}, inputs...)...)
	require.NoError(t, err)
	csvs, _ := filepath.Glob(filepath.Join(tables, "*.csv"))
	assert.NotEmpty(t, csvs)
	svgs, _ := filepath.Glob(filepath.Join(svg, "*.svg"))
	assert.NotEmpty(t, svgs)

	bad := filepath.Join(base, "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte("{not json\n"), 0o644))
	never := filepath.Join(base, "never")
	_, _, err = execute(t, "--format", "csv", "--out-dir", never, bad)
	assert.Equal(t, cmdutil.ExitUsage, cmdutil.ExitCode(err), "%v", err)
	assert.NoDirExists(t, never, "a bad input must leave no directory behind")

	file := filepath.Join(base, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for _, dir := range []string{file, filepath.Join(file, "sub")} {
		_, _, err = execute(t, append([]string{"--format", "csv", "--out-dir", dir}, inputs...)...)
		assert.Equal(t, cmdutil.ExitUsage, cmdutil.ExitCode(err), "%v", err)
		assert.Contains(t, err.Error(), "not a directory")
	}
}
