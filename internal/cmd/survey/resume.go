package survey

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/report"
)

// resumeKey holds the settings that give a survey's records their meaning.
// A file made with any other value cannot be continued honestly: its
// records and the new ones would be counted in one summary as one run.
type resumeKey struct {
	List struct {
		SHA256 string `json:"sha256"`
	} `json:"list"`
	Top        int    `json:"top"`
	Family     string `json:"family"`
	Method     string `json:"method"`
	Port       int    `json:"port"`
	Count      int    `json:"count"`
	Timeout    string `json:"timeout"`
	DNSTimeout string `json:"dns_timeout"`
	paths      []string
}

// readResumeHeader reads the header line of a survey output.
func readResumeHeader(path string) (resumeKey, error) {
	var k resumeKey
	f, err := os.Open(path)
	if err != nil {
		return k, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var h struct {
			Type string `json:"type"`
			report.Header
		}
		if err := json.Unmarshal(line, &h); err != nil || h.Type != report.TypeHeader {
			break
		}
		if h.Command != "survey" {
			return k, fmt.Errorf("not a survey output (its header says command %q)", h.Command)
		}
		if err := json.Unmarshal(h.Config, &k); err != nil {
			return k, fmt.Errorf("unreadable survey header config: %v", err)
		}
		for _, p := range h.Paths {
			k.paths = append(k.paths, p.Name)
		}
		return k, nil
	}
	if err := sc.Err(); err != nil {
		return k, err
	}
	return k, fmt.Errorf("no readable survey header on its first line: cannot tell which settings it was made with")
}

// checkResume compares the resumed file's settings with this run's and
// names every field that differs.
func checkResume(old, now resumeKey) error {
	var diffs []string
	diff := func(flag string, was, is any) {
		if fmt.Sprint(was) != fmt.Sprint(is) {
			diffs = append(diffs, fmt.Sprintf("%s %v in the file, %v now", flag, was, is))
		}
	}
	diff("list sha256", old.List.SHA256, now.List.SHA256)
	diff("--top", old.Top, now.Top)
	fo, _ := probe.ParseFamily(old.Family)
	fn, _ := probe.ParseFamily(now.Family)
	if fo != fn {
		diff("--family", old.Family, now.Family)
	}
	diff("--method", old.Method, now.Method)
	diff("--port", old.Port, now.Port)
	diff("--count", old.Count, now.Count)
	diff("--timeout", old.Timeout, now.Timeout)
	if old.DNSTimeout != "" { // older files do not record it
		diff("--dns-timeout", old.DNSTimeout, now.DNSTimeout)
	}
	op, np := slices.Sorted(slices.Values(old.paths)), slices.Sorted(slices.Values(now.paths))
	if !slices.Equal(op, np) {
		diff("--paths", strings.Join(op, ","), strings.Join(np, ","))
	}
	if len(diffs) > 0 {
		return fmt.Errorf("made with other settings, so its records cannot be continued: %s", strings.Join(diffs, "; "))
	}
	return nil
}
