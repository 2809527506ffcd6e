package analysis

import "fmt"

// Bytes a survey sent per path (004 §III surveys over a metered cellular
// path, so its cost matters): the DNS queries of its resolution records
// and the probes of its probe records, as each record counts them (IP
// packets; the survey's summary bytes_sent adds nothing else). Per run.
func init() {
	register(27, "survey-bytes", func() Section { return &surveyBytes{by: map[*Run]*bytesRun{}} })
}

type bytesRun struct {
	paths    []string
	dns, prb map[string]int64
}

type surveyBytes struct {
	by    map[*Run]*bytesRun
	order []*Run
}

func (s *surveyBytes) AppliesTo(cmd string) bool { return cmd == "survey" }

func (*surveyBytes) Types() []string { return []string{"resolution", "probe"} }

func (s *surveyBytes) Add(rec Record) error {
	br := s.by[rec.Run]
	if br == nil {
		br = &bytesRun{dns: map[string]int64{}, prb: map[string]int64{}}
		s.by[rec.Run] = br
		s.order = append(s.order, rec.Run)
	}
	var path string
	var n int64
	var into map[string]int64
	if rec.Type == "resolution" {
		r, err := decoded[resolutionRecord](rec)
		if err != nil {
			return err
		}
		path, n, into = r.Path, r.Bytes, br.dns
	} else {
		r, err := decoded[probeRecord](rec)
		if err != nil {
			return err
		}
		path, n, into = r.ProbePath, r.Bytes, br.prb
	}
	if _, ok := br.dns[path]; !ok {
		if _, ok := br.prb[path]; !ok {
			br.paths = append(br.paths, path)
		}
	}
	into[path] += n
	return nil
}

func (s *surveyBytes) Tables() []Table {
	t := Table{Name: "survey-bytes", Title: "Bytes sent per path",
		Note:    "IP bytes of the DNS queries (resolution records) and probes (probe records) sent through each path",
		Columns: []string{"run", "path", "dns_bytes", "probe_bytes", "total_bytes"}}
	for _, run := range s.order {
		br := s.by[run]
		order := run.pathNames()
		pathOrder(order, br.paths)
		for _, p := range br.paths {
			t.Rows = append(t.Rows, []string{shortID(run), p, fmt.Sprint(br.dns[p]), fmt.Sprint(br.prb[p]), fmt.Sprint(br.dns[p] + br.prb[p])})
		}
	}
	return []Table{t}
}
