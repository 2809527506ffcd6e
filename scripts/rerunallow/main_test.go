package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// writeModule makes a module example.com/m with a marked and an unmarked
// test in package p.
func writeModule(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/m\n\ngo 1.22\n",
		"p/p_test.go": "package p\n\nimport \"testing\"\n\n" +
			"// TestTiming compares with the emulator.\n" +
			Marker + " host stalls push one sample past the tolerance\n" +
			"func TestTiming(t *testing.T) {}\n\n" +
			"// TestLogic has no allowance.\nfunc TestLogic(t *testing.T) {}\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestCheck: a re-run of a marked test (or one of its subtests) passes, a
// re-run of any other test, even beside allowed ones, fails the check.
func TestCheck(t *testing.T) {
	allowed, err := Allowed(writeModule(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(allowed) != 1 || allowed["example.com/m/p.TestTiming"] == "" {
		t.Fatalf("allowed %v, want only example.com/m/p.TestTiming", allowed)
	}
	for _, c := range []struct {
		report string
		bad    int
	}{
		{"", 0},
		{"example.com/m/p.TestTiming: 2 runs, 1 failures\n", 0},
		{"example.com/m/p.TestTiming/sub/case_1: 2 runs, 1 failures\n", 0},
		{"example.com/m/p.TestLogic: 2 runs, 1 failures\n", 1},
		{"example.com/m/p.TestTiming: 2 runs, 1 failures\nexample.com/m/p.TestLogic/x: 3 runs, 2 failures\n", 1},
		// Same name, other package: not allowed.
		{"example.com/m/q.TestTiming: 2 runs, 1 failures\n", 1},
		// A prefix of an allowed name is another test.
		{"example.com/m/p.TestTim: 2 runs, 1 failures\n", 1},
	} {
		rs, err := ParseReport(strings.NewReader(c.report))
		if err != nil {
			t.Fatalf("%q: %v", c.report, err)
		}
		var out bytes.Buffer
		if bad := Check(&out, rs, allowed); bad != c.bad {
			t.Errorf("%q: %d not allowed, want %d:\n%s", c.report, bad, c.bad, out.String())
		}
		if n := strings.Count(out.String(), "\n"); n != len(rs) {
			t.Errorf("%q: %d lines listed for %d re-runs", c.report, n, len(rs))
		}
	}
}

// TestParseReportRefusesUnknownLines: a report it cannot read is an error,
// never "nothing was re-run".
func TestParseReportRefusesUnknownLines(t *testing.T) {
	for _, bad := range []string{"example.com/m/p.TestX failed twice\n", "TestX: 2 runs, 1 failures\n"} {
		if _, err := ParseReport(strings.NewReader(bad)); err == nil {
			t.Errorf("%q read without error", bad)
		}
	}
}

// TestMisplacedMarker: a marker that is not on a test function, or gives
// no reason, is an error rather than an allowance for nothing.
func TestMisplacedMarker(t *testing.T) {
	for _, src := range []string{
		Marker + " why\nfunc helper() {}\n",
		Marker + " why\n\nfunc TestX(t *testing.T) {}\n",
		Marker + "\nfunc TestX(t *testing.T) {}\n",
	} {
		if _, err := markedTests([]byte(src)); err == nil {
			t.Errorf("%q accepted", src)
		}
	}
}

// TestRepositoryMarkers: this repository's markers all parse, and the
// emulator's own timing tests carry one.
func TestRepositoryMarkers(t *testing.T) {
	allowed, err := Allowed("../..")
	if err != nil {
		t.Fatal(err)
	}
	if allowed["github.com/mptester/mptester/lab/emu.TestDelayAccuracy"] == "" {
		t.Errorf("lab/emu.TestDelayAccuracy not allowed a re-run; allowed: %v", allowed)
	}
	for name := range allowed {
		if strings.Contains(name, "TestLabMobileScenarios") || strings.Contains(name, "TestConformanceLab") {
			t.Errorf("%s is allowed a re-run: its cause was fixed, a failure there is a regression", name)
		}
	}
}

// TestGotestsumReport runs gotestsum with --rerun-fails on a package whose
// two tests each fail once then pass: the report lists both, and the check
// fails on the unmarked one. Skipped without gotestsum (scripts/test
// installs it).
func TestGotestsumReport(t *testing.T) {
	gts, err := exec.LookPath("gotestsum")
	if err != nil {
		gopath, _ := exec.Command("go", "env", "GOPATH").Output()
		gts = filepath.Join(strings.TrimSpace(string(gopath)), "bin", "gotestsum")
		if _, err := os.Stat(gts); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal("gotestsum not installed (scripts/test installs it; CI=true: not skipping)")
			}
			t.Skip("gotestsum not installed (go install gotest.tools/gotestsum@v1.13.0)")
		}
	}
	dir := writeModule(t)
	state := t.TempDir()
	// Each test fails on its first run only (a file marks the first run).
	body := "package p\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\n" +
		"func flakeOnce(t *testing.T) {\n\tf := os.Getenv(\"STATE\") + \"/\" + t.Name()\n" +
		"\tif _, err := os.Stat(f); err != nil {\n\t\tos.WriteFile(f, nil, 0o644)\n\t\tt.Fatal(\"first run fails\")\n\t}\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "p", "flake_test.go"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	src, _ := os.ReadFile(filepath.Join(dir, "p", "p_test.go"))
	src = bytes.ReplaceAll(src, []byte("(t *testing.T) {}"), []byte("(t *testing.T) { flakeOnce(t) }"))
	if err := os.WriteFile(filepath.Join(dir, "p", "p_test.go"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(t.TempDir(), "reruns")
	cmd := exec.Command(gts, "--format", "pkgname", "--rerun-fails=2", "--rerun-fails-run-root-test",
		"--rerun-fails-report", report, "--packages=./...", "--", "-count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "STATE="+state, "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gotestsum: %v\n%s", err, out)
	}
	f, err := os.Open(report)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rs, err := ParseReport(f)
	if err != nil {
		t.Fatal(err)
	}
	allowed, err := Allowed(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if bad := Check(&out, rs, allowed); bad != 1 || len(rs) != 2 {
		t.Errorf("%d re-runs, %d not allowed (want 2, 1):\n%s", len(rs), bad, out.String())
	}
	t.Logf("check:\n%s", out.String())
}
