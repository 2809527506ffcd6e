package run

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/mptester/mptester/internal/fsutil"
	"github.com/mptester/mptester/patterns"
	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/report"
)

// ciCase is one test of the run as CI systems see it: a test of the
// pattern x transport x family x path matrix that ran (Status empty when
// it passed), one that did not apply (Skipped), or a check of the run as a
// whole that failed (the run's own error, an alternative port).
type ciCase struct {
	Name      string
	Transport string
	Time      time.Duration
	Status    string // "": passed
	Cause     string
	Error     string
	Server    string
	Skipped   string // why the test does not apply
}

func (c ciCase) failed() bool { return c.Status != "" }

// ciReport collects the cases of a run for --junit (and the GitHub
// Actions annotations and summary). The JUnit file is rewritten
// atomically after every test, so an interrupted or killed run leaves
// what ran so far, and the last write carries the run's end.
type ciReport struct {
	path  string // --junit FILE ("": none)
	hdr   report.Header
	props [][2]string
	cases []ciCase
	// status and reason of the run document; "running" until it ends.
	status, reason string
	err            error // the first failed write
}

func newCIReport(path string, hdr report.Header, opts *Options) *ciReport {
	fp := opts.Pin
	switch {
	case opts.Insecure:
		fp = "insecure (not verified)"
	case fp == "":
		fp = "system roots"
	}
	r := &ciReport{path: path, hdr: hdr, status: "running"}
	r.props = [][2]string{
		{"server", strings.Join(opts.Servers, ",")},
		{"fingerprint", fp},
		{"mptester.version", hdr.Tool.Version},
		{"mptester.commit", hdr.Tool.Commit},
		{"go.version", runtime.Version()},
		{"os", hdr.Host.OS + "/" + hdr.Host.Arch},
		{"kernel", hdr.Host.Kernel},
		{"run_id", hdr.RunID},
		{"probe_id", hdr.ProbeID},
		{"seed", fmt.Sprint(opts.Seed)},
		{"smoke", fmt.Sprint(opts.Smoke)},
	}
	return r
}

// setProp replaces or adds a property.
func (r *ciReport) setProp(name, value string) {
	for i := range r.props {
		if r.props[i][0] == name {
			r.props[i][1] = value
			return
		}
	}
	r.props = append(r.props, [2]string{name, value})
}

// testName is how a test is named in the JUnit file, the annotations and
// the FAIL lines of --smoke.
func testName(c patterns.TestConfig) string {
	return fmt.Sprintf("%s/%s over %s (IPv%d)", c.Pattern, c.Transport, c.Path, c.Family)
}

// record adds a test record as the run emits it (raw: its JSON, for a
// "cause" the record may carry). suffix names an alternative port.
func (r *ciReport) record(rec patterns.Record, raw []byte, suffix string, smoke bool) {
	c := ciCase{Name: testName(rec.Config) + suffix, Transport: rec.Config.Transport,
		Time: rec.FinishedAt.Sub(rec.StartedAt), Error: rec.Error, Server: rec.Config.Server.String()}
	var extra struct {
		Cause string `json:"cause"`
	}
	_ = json.Unmarshal(raw, &extra)
	c.Cause = extra.Cause
	switch {
	case rec.Status != patterns.StatusSuccess:
		c.Status = string(rec.Status)
	case rec.Invalid:
		c.Status = "invalid"
	case smoke:
		// --smoke fails a transport that was not really used (MPTCP
		// falling back to TCP), as its FAIL lines do.
		if d, ok := rec.Summary.(transport.Degraded); ok {
			if why := d.Degraded(); why != "" {
				c.Status, c.Cause = "degraded", why
			}
		}
	}
	r.cases = append(r.cases, c)
	r.flush()
}

// check adds a failed check of the run as a whole.
func (r *ciReport) check(name, status string, err error) {
	r.cases = append(r.cases, ciCase{Name: name, Status: status, Error: err.Error()})
	r.flush()
}

// notApplicable adds the tests of the matrix that did not run because
// they do not apply (a transport that does not carry the pattern, a path
// or server without an address of the family). Called only after the
// whole matrix ran.
func (r *ciReport) notApplicable(opts *Options, paths []probe.Path, fams []probe.Family, ran []patterns.Record) {
	type key struct {
		pattern, transport, path string
		family                   int
	}
	seen := map[key]bool{}
	for _, rec := range ran {
		c := rec.Config
		seen[key{c.Pattern, c.Transport, c.Path, c.Family}] = true
		seen[key{c.Pattern, c.Transport, "", c.Family}] = true // a multipath row, whichever its primary
	}
	for _, f := range fams {
		for _, tr := range opts.Transports {
			d, err := transport.Get(tr)
			if err != nil {
				continue
			}
			for _, pat := range opts.Patterns {
				p, err := patterns.Get(pat)
				if err != nil {
					continue
				}
				why := func(path *probe.Path) string {
					switch {
					case !d.Carries(p.Family()):
						return fmt.Sprintf("%s does not carry the %s pattern", tr, pat)
					case path == nil:
						return fmt.Sprintf("no path reaches an IPv%d address of the server", f)
					}
					if _, ok := path.SourceAddr(f); !ok {
						return fmt.Sprintf("%s has no IPv%d address", path.Name, f)
					}
					return fmt.Sprintf("the server has no IPv%d address on %s", f, path.Name)
				}
				if d.Multipath {
					if !seen[key{pat, tr, "", int(f)}] {
						name := testName(patterns.TestConfig{Pattern: pat, Transport: tr, Path: strings.Join(names(paths), "+"), Family: int(f)})
						r.cases = append(r.cases, ciCase{Name: name, Transport: tr, Skipped: why(nil)})
					}
					continue
				}
				for i := range paths {
					if !seen[key{pat, tr, paths[i].Name, int(f)}] {
						name := testName(patterns.TestConfig{Pattern: pat, Transport: tr, Path: paths[i].Name, Family: int(f)})
						r.cases = append(r.cases, ciCase{Name: name, Transport: tr, Skipped: why(&paths[i])})
					}
				}
			}
		}
	}
}

// end records how the run ended, writes the file a last time and
// returns the first write's error.
func (r *ciReport) end(server string, status report.Status, reason string) error {
	if server != "" {
		r.setProp("server", server)
	}
	r.status, r.reason = string(status), reason
	r.flush()
	return r.err
}

// counts are the run's tests, failures and skipped tests.
func (r *ciReport) counts() (tests, failures, skipped int) {
	for _, c := range r.cases {
		tests++
		switch {
		case c.Skipped != "":
			skipped++
		case c.failed():
			failures++
		}
	}
	return tests, failures, skipped
}

// flush rewrites the file; a failure is kept for end (the run goes on:
// its document is the primary output).
func (r *ciReport) flush() {
	if r.path == "" {
		return
	}
	b, err := r.junit(time.Now())
	if err == nil {
		err = fsutil.WriteFileAtomic(r.path, b, 0o644)
	}
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("--junit: %w", err)
	}
}

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// junit renders the report as JUnit XML (the schema Jenkins, GitLab and
// GitHub's test reporters read: testsuites > testsuite > testcase with
// failure or skipped).
func (r *ciReport) junit(now time.Time) ([]byte, error) {
	tests, failures, skipped := r.counts()
	elapsed := seconds(now.Sub(r.hdr.StartedAt))
	props := slices.Clone(r.props)
	props = append(props, [2]string{"status", r.status})
	if r.reason != "" {
		props = append(props, [2]string{"reason", r.reason})
	}
	s := junitSuite{Name: "mptester run", Tests: tests, Failures: failures, Skipped: skipped, Time: elapsed,
		Timestamp: r.hdr.StartedAt.UTC().Format("2006-01-02T15:04:05")}
	for _, p := range props {
		if p[1] != "" {
			s.Properties = append(s.Properties, junitProperty{Name: p[0], Value: p[1]})
		}
	}
	for _, c := range r.cases {
		jc := junitCase{Name: c.Name, Classname: "mptester.run", Time: seconds(c.Time)}
		if c.Transport != "" {
			jc.Classname += "." + c.Transport
		}
		switch {
		case c.Skipped != "":
			jc.Skipped = &junitMessage{Message: c.Skipped}
		case c.failed():
			jc.Failure = &junitMessage{Message: c.message(), Type: c.Status, Text: c.details()}
		}
		s.Cases = append(s.Cases, jc)
	}
	doc := junitSuites{Name: "mptester", Tests: tests, Failures: failures, Skipped: skipped, Time: elapsed, Suites: []junitSuite{s}}
	b, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append([]byte(xml.Header), append(b, '\n')...), nil
}

// message is a failure in one line, the status first.
func (c ciCase) message() string {
	m := c.Status
	if c.Cause != "" {
		m += " (" + c.Cause + ")"
	}
	if c.Error != "" {
		m += ": " + c.Error
	}
	return m
}

// details are a failure's fields, one a line.
func (c ciCase) details() string {
	var b strings.Builder
	for _, kv := range [][2]string{{"status", c.Status}, {"cause", c.Cause}, {"error", c.Error}, {"server", c.Server}} {
		if kv[1] != "" {
			fmt.Fprintf(&b, "%s: %s\n", kv[0], kv[1])
		}
	}
	return b.String()
}
