package survey

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
)

// resume loads the resolution and probe records of an interrupted run's
// output, copies them to the new output (so the new file alone is the whole
// run) and marks that work done. Lines it cannot use are skipped: a run
// killed mid-write may end with a torn line.
func (r *runner) resume(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 256<<10), 64<<20)
	var kind struct {
		Type    string `json:"type"`
		Command string `json:"command"`
	}
	if r.list != nil {
		r.list.Index() // name -> index for the resolution records
		defer r.list.DropIndex()
	}
	line, used, torn, header := 0, 0, 0, false
	for sc.Scan() {
		line++
		b := sc.Bytes()
		kind.Type, kind.Command = "", ""
		if err := json.Unmarshal(b, &kind); err != nil {
			torn++
			continue
		}
		if !header && kind.Type != "header" {
			// Without its header nothing says which settings made the
			// records: they cannot be continued.
			return fmt.Errorf("resume: line %d: no survey header before the records", line)
		}
		switch kind.Type {
		case "header":
			if kind.Command != "survey" {
				return fmt.Errorf("resume: line %d: not a survey output (command %q)", line, kind.Command)
			}
			header = true
		case "resolution":
			var rec ResolutionRecord
			if err := json.Unmarshal(b, &rec); err != nil {
				torn++
				continue
			}
			st, okPath := r.status[rec.Path]
			i, ok := 0, false
			if r.list != nil {
				i, ok = r.list.Find(rec.Domain)
			}
			if !ok || !okPath || rec.Status == "" || i >= len(st) {
				continue // not in this run's list or paths
			}
			st[i] = r.codes.code(rec.Status)
			if rec.Status == StatusNoError {
				r.resumed = append(r.resumed, resumedResolution{rpi: slices.Index(r.names, rec.Path), di: i, addrs: rec.Answers})
			}
			r.bytes[rec.Path].Add(rec.Bytes)
			if err := r.write(json.RawMessage(append([]byte(nil), b...))); err != nil {
				return err
			}
			used++
		case "probe":
			var rec ProbeRecord
			if err := json.Unmarshal(b, &rec); err != nil {
				torn++
				continue
			}
			m, ok := r.results[rec.ProbePath]
			if !ok || !rec.Address.IsValid() || rec.Method != r.cfg.Method {
				continue
			}
			if rec.HostOverloaded { // not measured: probed again
				r.bytes[rec.ProbePath].Add(rec.Bytes)
				continue
			}
			m[rec.Address] = TargetResult{Responsive: rec.Responsive, MedianMs: rec.Median}
			r.bytes[rec.ProbePath].Add(rec.Bytes)
			if err := r.write(json.RawMessage(append([]byte(nil), b...))); err != nil {
				return err
			}
			used++
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("resume: read: %w", err)
	}
	if !header {
		return fmt.Errorf("resume: no survey header (the file is empty or unreadable)")
	}
	r.log.Info("resuming", "records", used, "unreadable_lines", torn)
	return nil
}
