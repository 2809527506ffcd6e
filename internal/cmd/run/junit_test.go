package run

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mptester/mptester/internal/nstest"
	"github.com/mptester/mptester/patterns"
	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/report"
)

// junitparserPython is Debian's interpreter, where python3-junitparser
// installs (a PATH python3 may be another one).
const junitparserPython = "/usr/bin/python3"

// readJUnit reads a JUnit file with an independent consumer, Debian's
// python3-junitparser, and returns what it saw: counts, and per test its
// result and message.
func readJUnit(t *testing.T, path string) (got struct {
	Tests, Failures, Skipped, Errors int
	Cases                            []struct{ Name, Classname, Result, Message, Type string }
	Properties                       map[string]string
}) {
	t.Helper()
	if err := exec.Command(junitparserPython, "-c", "import junitparser").Run(); err != nil {
		nstest.SkipUnless(t, "python3-junitparser not found: apt-get install python3-junitparser")
	}
	const script = `
import json, sys
from junitparser import JUnitXml, Failure, Skipped, Error
xml = JUnitXml.fromfile(sys.argv[1])
out = {"Tests": 0, "Failures": 0, "Skipped": 0, "Errors": 0, "Cases": [], "Properties": {}}
for suite in xml:
    for p in suite.properties():
        out["Properties"][p.name] = p.value
    for case in suite:
        out["Tests"] += 1
        res, msg, typ = "passed", "", ""
        for r in case.result:
            if isinstance(r, Failure):
                res = "failure"; out["Failures"] += 1
            elif isinstance(r, Skipped):
                res = "skipped"; out["Skipped"] += 1
            elif isinstance(r, Error):
                res = "error"; out["Errors"] += 1
            msg, typ = r.message or "", r.type or ""
        out["Cases"].append({"Name": case.name, "Classname": case.classname, "Result": res, "Message": msg, "Type": typ})
# the attributes junitparser reads must agree with the cases
xml.update_statistics()
json.dump(out, sys.stdout)
`
	out, err := exec.Command(junitparserPython, "-c", script, path).Output()
	if err != nil {
		t.Fatalf("junitparser: %v: %s", err, out)
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("junitparser output %s: %v", out, err)
	}
	return got
}

// TestJUnitSmokeBrokenTransport: a --smoke run whose QUIC port is
// wrong (it points at the TCP listener) and whose server has no MPTCP.
// python3-junitparser reads the JUnit file: as many tests, failures and
// skipped tests as the run had, each failure's message starting with the
// record's status, and the run's properties.
//
// Under GITHUB_ACTIONS=true the same run also writes one error annotation
// per failure and appends its summary table to GITHUB_STEP_SUMMARY.
func TestJUnitSmokeBrokenTransport(t *testing.T) {
	tp, _, mp, pin := startServerMPQUIC(t, true)
	file := filepath.Join(t.TempDir(), "smoke.xml")
	summaryFile := filepath.Join(t.TempDir(), "summary.md")
	if err := os.WriteFile(summaryFile, []byte("earlier step\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GITHUB_ACTIONS", "true")
	t.Setenv("GITHUB_STEP_SUMMARY", summaryFile)
	out, errOut, err := execute(t, nil, "--smoke", "--junit", file, "--server", "127.0.0.1", "--tcp-port", fmt.Sprint(tp), "--quic-port", fmt.Sprint(tp),
		"--quic-alt-port", "0", "--mpquic-port", fmt.Sprint(mp), "--pin", pin, "--paths", "lo",
		"--interval", "50ms", "--ping-count", "3", "--duration", "300ms", "--connect-timeout", "1s", "--timeout", "5s")
	if err == nil {
		t.Fatalf("smoke passed with a broken transport:\n%s", errOut)
	}
	var doc report.Document
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	status := map[string]string{} // test name -> status in the document ("" passed)
	for _, raw := range doc.Records {
		var r patterns.Record
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		if r.Type != patterns.RecordType {
			continue
		}
		st := ""
		if r.Status != patterns.StatusSuccess {
			st = string(r.Status)
		}
		status[testName(r.Config)] = st
	}
	fails := strings.Count(errOut, "\nFAIL ")
	if strings.HasPrefix(errOut, "FAIL ") {
		fails++
	}
	// Not applicable: the patterns a transport does not carry.
	skipped := 0
	for _, d := range transport.All() {
		for _, n := range patterns.Names() {
			if p, _ := patterns.Get(n); !d.Carries(p.Family()) {
				skipped++
			}
		}
	}
	if skipped == 0 {
		t.Fatal("no transport leaves out a pattern: the test checks no skipped case")
	}

	if b, _ := os.ReadFile(file); os.Getenv("JUNIT_DUMP") != "" {
		t.Logf("%s\n%s", b, errOut)
	}
	got := readJUnit(t, file)
	if got.Tests != len(status)+skipped || got.Failures != fails || got.Skipped != skipped || got.Errors != 0 {
		t.Fatalf("junitparser: %d tests, %d failures, %d skipped, %d errors; the run: %d tests + %d not applicable, %d FAIL lines\n%s",
			got.Tests, got.Failures, got.Skipped, got.Errors, len(status), skipped, fails, errOut)
	}
	broken := 0
	for _, c := range got.Cases {
		st, ran := status[c.Name]
		switch {
		case c.Result == "skipped":
			if ran || !strings.Contains(c.Message, "does not carry") {
				t.Errorf("%s skipped (%q) but ran or for another reason", c.Name, c.Message)
			}
		case !ran:
			t.Errorf("%s is not a test of the run", c.Name)
		case c.Result == "failure":
			// a failed test names its status; MPTCP fell back to TCP.
			want := st
			if st == "" {
				want = "degraded"
			}
			if c.Type != want || !strings.HasPrefix(c.Message, want) {
				t.Errorf("%s: failure %q type %q, want status %q", c.Name, c.Message, c.Type, want)
			}
			if !strings.Contains(errOut, "FAIL "+c.Name) {
				t.Errorf("%s failed in JUnit, not in the FAIL lines", c.Name)
			}
			if d, _ := transport.Get(strings.TrimPrefix(c.Classname, "mptester.run.")); d.Listener() == "quic" {
				broken++
			}
		case st != "":
			t.Errorf("%s passed in JUnit, %s in the document", c.Name, st)
		}
	}
	if broken == 0 {
		t.Error("no failure of a transport served on the broken QUIC port")
	}
	for k, want := range map[string]string{"server": "127.0.0.1", "fingerprint": pin, "status": string(doc.Status), "run_id": doc.RunID} {
		if got.Properties[k] != want {
			t.Errorf("property %s = %q, want %q", k, got.Properties[k], want)
		}
	}
	if got.Properties["mptester.version"] == "" || got.Properties["go.version"] == "" {
		t.Errorf("no versions in the properties: %v", got.Properties)
	}

	// GitHub Actions: an annotation per failure, titled by the test.
	annotations := map[string]string{}
	for _, l := range strings.Split(errOut, "\n") {
		if rest, ok := strings.CutPrefix(l, "::error title="); ok {
			title, msg, ok := strings.Cut(rest, "::")
			if !ok {
				t.Fatalf("annotation without a message: %q", l)
			}
			annotations[unescapeGH(title)] = unescapeGH(msg)
		}
	}
	summary, err := os.ReadFile(summaryFile)
	if err != nil {
		t.Fatal(err)
	}
	failedRows := strings.Count(string(summary), "| ❌ ")
	if !strings.HasPrefix(string(summary), "earlier step\n### ❌ mptester run against `127.0.0.1`") || failedRows != got.Failures ||
		strings.Count(string(summary), "| ➖ not applicable |") != got.Skipped {
		t.Errorf("step summary (%d failed rows, want %d):\n%s", failedRows, got.Failures, summary)
	}
	if len(annotations) != got.Failures {
		t.Errorf("%d annotations, %d failures:\n%s", len(annotations), got.Failures, errOut)
	}
	for _, c := range got.Cases {
		if c.Result == "failure" && annotations["mptester "+c.Name] != c.Message {
			t.Errorf("annotation of %s: %q, want %q", c.Name, annotations["mptester "+c.Name], c.Message)
		}
	}
}

// unescapeGH undoes the workflow-command escapes as the runner does.
func unescapeGH(s string) string {
	return strings.NewReplacer("%0D", "\r", "%0A", "\n", "%3A", ":", "%2C", ",", "%25", "%").Replace(s)
}

// TestGitHubEscapes: what could end a command early (a line break, "::"
// or "," in a property) is escaped, and the runner's unescaping gives the
// text back.
func TestGitHubEscapes(t *testing.T) {
	r := &ciReport{cases: []ciCase{{Name: "ping/tcp over a:b,c (IPv4) 100%", Status: "tls-error",
		Error: "line one\r\nline two:: 50% done, ::error::x"}}}
	var buf strings.Builder
	if err := r.annotate(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") || strings.Contains(out, "\r") {
		t.Fatalf("not one line: %q", out)
	}
	rest, _ := strings.CutPrefix(out[:len(out)-1], "::error title=")
	title, msg, _ := strings.Cut(rest, "::")
	if strings.ContainsAny(title, ":,") {
		t.Fatalf("title not escaped: %q", title)
	}
	if unescapeGH(title) != "mptester "+r.cases[0].Name || unescapeGH(msg) != r.cases[0].message() {
		t.Fatalf("round trip: %q / %q", unescapeGH(title), unescapeGH(msg))
	}
	if sum := r.summary(); !strings.Contains(sum, "\n| ping/tcp over a:b,c (IPv4) 100% | ❌ tls-error | 0.000s | tls-error: line one line two:: 50% done, ::error::x |\n") {
		t.Fatalf("summary:\n%s", sum)
	}
}

// TestJUnitInterrupted: the file is complete XML after every test, so a
// run killed midway leaves what ran so far, and the last write carries
// how the run ended.
func TestJUnitInterrupted(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "j.xml")
	hdr := report.Header{RunID: "r1", StartedAt: time.Now()}
	r := newCIReport(file, hdr, &Options{Servers: []string{"s"}, Insecure: true})
	var cases []int
	for i := range 3 {
		rec := patterns.Record{Type: patterns.RecordType, Config: patterns.TestConfig{Pattern: "ping", Transport: "tcp", Path: fmt.Sprint("p", i), Family: 4},
			Status: patterns.StatusSuccess}
		if i == 2 {
			rec.Status, rec.Error = patterns.StatusCancelled, "context canceled"
		}
		r.record(rec, nil, "", false)
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var doc junitSuites
		if err := xml.Unmarshal(b, &doc); err != nil {
			t.Fatalf("after test %d: %v", i, err)
		}
		cases = append(cases, len(doc.Suites[0].Cases))
		if p := prop(doc, "status"); p != "running" {
			t.Fatalf("status %q while running", p)
		}
	}
	if fmt.Sprint(cases) != "[1 2 3]" {
		t.Fatalf("cases after each test: %v", cases)
	}
	if err := r.end("", report.StatusPartial, "cancelled"); err != nil {
		t.Fatal(err)
	}
	got := readJUnit(t, file)
	if got.Tests != 3 || got.Failures != 1 || got.Properties["status"] != "partial" || got.Properties["reason"] != "cancelled" ||
		got.Properties["fingerprint"] != "insecure (not verified)" {
		t.Fatalf("%+v", got)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("temporary files left: %v", ents)
	}
}

func prop(doc junitSuites, name string) string {
	for _, p := range doc.Suites[0].Properties {
		if p.Name == name {
			return p.Value
		}
	}
	return ""
}

// TestJUnitUsage: a bad --junit is an error before anything is written.
func TestJUnitUsage(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.json")
	for _, args := range [][]string{
		{"--junit", "-"},
		{"--junit", dir},
		{"--junit", filepath.Join(dir, "none", "j.xml")},
		{"--junit", out, "--output", out},
		{"--junit", filepath.Join(dir, "j.xml"), "--mode", "mobile"},
	} {
		_, _, err := execute(t, nil, append([]string{"--server", "127.0.0.1", "--insecure", "--paths", "lo"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "--junit") {
			t.Errorf("%v: err %v, want a --junit usage error", args, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("files written: %v", ents)
	}
}
