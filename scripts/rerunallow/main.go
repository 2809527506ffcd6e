// Command rerunallow checks a gotestsum re-run report against the tests
// allowed a re-run, so a flaky re-run cannot hide a regression anywhere
// else:
//
//	go run ./scripts/rerunallow REPORT...
//
// A test is allowed a re-run only when a comment line directly above its
// function (in its doc comment) says why:
//
//	// ci:rerun-allowed: the emulator shares two vCPUs with the test; a host
//	// stall can push one delivery past the tolerance
//	func TestDelayAccuracy(t *testing.T) {
//
// gotestsum's --rerun-fails re-runs every failed test; REPORT is its
// --rerun-fails-report ("pkg.TestName/sub: N runs, M failures" a line).
// rerunallow prints every re-run test with its verdict and exits 1 if any
// test that failed was not marked (or 2 on a bad argument or report).
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Marker starts the comment that allows a test a re-run.
const Marker = "// ci:rerun-allowed:"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: rerunallow REPORT...")
		os.Exit(2)
	}
	allowed, err := Allowed(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "rerunallow:", err)
		os.Exit(2)
	}
	var reruns []Rerun
	for _, name := range os.Args[1:] {
		f, err := os.Open(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // gotestsum writes no report when nothing failed
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "rerunallow:", err)
			os.Exit(2)
		}
		rs, err := ParseReport(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "rerunallow: %s: %v\n", name, err)
			os.Exit(2)
		}
		reruns = append(reruns, rs...)
	}
	if bad := Check(os.Stdout, reruns, allowed); bad > 0 {
		fmt.Printf("%d test(s) passed only on a re-run without a %q comment: a failure there is a regression until shown otherwise\n", bad, Marker)
		os.Exit(1)
	}
}

// Rerun is one line of a gotestsum re-run report.
type Rerun struct {
	Package, Test  string // Test may be a subtest (Root/sub)
	Runs, Failures int
}

// Root is the top-level test a re-run ran (the allowance is per function).
func (r Rerun) Root() string { return strings.SplitN(r.Test, "/", 2)[0] }

var reportLine = regexp.MustCompile(`^(\S+?)\.(Test[^/\s.]*(?:/.*)?|Example[^/\s.]*|Fuzz[^/\s.]*(?:/.*)?): (\d+) runs, (\d+) failures$`)

// ParseReport reads gotestsum's --rerun-fails-report. A line it cannot
// read is an error: a format change must not read as "nothing re-run".
func ParseReport(r io.Reader) ([]Rerun, error) {
	var out []Rerun
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		m := reportLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("line %d: not \"pkg.TestName: N runs, M failures\": %q", n, line)
		}
		var rr Rerun
		rr.Package, rr.Test = m[1], m[2]
		fmt.Sscan(m[3], &rr.Runs)
		fmt.Sscan(m[4], &rr.Failures)
		out = append(out, rr)
	}
	return out, sc.Err()
}

// Allowed lists the tests under root marked with Marker, as
// "importpath.TestName", each with its reason.
func Allowed(root string) (map[string]string, error) {
	mod, err := modulePath(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := mod
		if rel != "." {
			pkg += "/" + filepath.ToSlash(rel)
		}
		marks, err := markedTests(b)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for name, why := range marks {
			out[pkg+"."+name] = why
		}
		return nil
	})
	return out, err
}

var testFunc = regexp.MustCompile(`^func (Test\w*|Fuzz\w*|Example\w*)\(`)

// markedTests finds the marked test functions of one file. A marker not in
// the doc comment of a test function, or without a reason, is an error (a
// misplaced one would silently allow nothing).
func markedTests(src []byte) (map[string]string, error) {
	out := map[string]string{}
	lines := strings.Split(string(src), "\n")
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, Marker) {
			continue
		}
		why := strings.TrimSpace(strings.TrimPrefix(l, Marker))
		if why == "" {
			return nil, fmt.Errorf("line %d: %s without a reason", i+1, Marker)
		}
		j := i + 1
		for j < len(lines) && strings.HasPrefix(lines[j], "//") {
			j++
		}
		m := testFunc.FindStringSubmatch(func() string {
			if j < len(lines) {
				return lines[j]
			}
			return ""
		}())
		if m == nil {
			return nil, fmt.Errorf("line %d: %s is not in the doc comment of a test function", i+1, Marker)
		}
		out[m[1]] = why
	}
	return out, nil
}

func modulePath(gomod string) (string, error) {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		if f := strings.Fields(string(l)); len(f) == 2 && f[0] == "module" {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("%s: no module line", gomod)
}

// Check writes each re-run test with its verdict to w and returns how many
// were not allowed.
func Check(w io.Writer, reruns []Rerun, allowed map[string]string) int {
	bad := 0
	slices.SortFunc(reruns, func(a, b Rerun) int { return strings.Compare(a.Package+"."+a.Test, b.Package+"."+b.Test) })
	for _, r := range reruns {
		why, ok := allowed[r.Package+"."+r.Root()]
		verdict := "allowed: " + why
		if !ok {
			bad++
			verdict = "NOT ALLOWED (no " + Marker + " on " + r.Root() + ")"
		}
		fmt.Fprintf(w, "  %s.%s: %d runs, %d failures: %s\n", r.Package, r.Test, r.Runs, r.Failures, verdict)
	}
	return bad
}
