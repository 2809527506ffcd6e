package analysis

import (
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"
)

// Resolution per path and the overlap between the first two paths of each
// survey run (study 004 §III: 58.74% of IPs common, about 40% of sites
// resolve differently). Definitions are survey.Summary's: a domain is
// resolved on a path when its status is NOERROR; overlap = common/|A∪B| of
// the unique addresses; domains differ = domains resolved on both paths
// whose address sets differ, over all domains. Overlap is per run: two
// runs' address sets are not one population.
func init() {
	register(10, "resolution", func() Section { return &resolution{runs: map[*Run]*resRun{}} })
}

type resolutionRecord struct {
	Domain  string   `json:"domain"`
	Path    string   `json:"path"`
	Status  string   `json:"status"`
	Answers []string `json:"answers"`
	// AnswersMapped: the answers with a DNS64's synthesized AAAA mapped to
	// their IPv4 (the survey counts these; absent when none was).
	AnswersMapped []string `json:"answers_mapped"`
	Bytes         int64    `json:"bytes"`
}

type domainRes struct {
	ok  bool
	set uint64 // hash of the sorted address set: a domain's answers are not held
}

type resRun struct {
	run      *Run
	paths    []string
	byStatus map[string]map[string]int // path -> status -> domains
	synth    map[string]int            // path -> domains answered with a synthesized AAAA (answers_mapped)
	addrs    map[string]map[string]struct{}
	pathIdx  map[string]int
	domains  map[string][]domainRes // domain -> result by path index (a slice: a map per domain costs more than the answers)
}

// resolution keeps one run's domains while it is read; at its end the
// run's rows are made and its maps dropped.
type resolution struct {
	runs    map[*Run]*resRun
	res, ov [][]string
	synth   []int // per row of res: domains answered with a synthesized AAAA
}

func (s *resolution) AppliesTo(cmd string) bool { return cmd == "survey" }

func (*resolution) Types() []string { return []string{"resolution"} }

func (s *resolution) Add(rec Record) error {
	if rec.Type != "resolution" {
		return nil
	}
	r, err := decoded[resolutionRecord](rec)
	if err != nil {
		return err
	}
	if r.Path == "" || r.Domain == "" || r.Status == "" {
		return fmt.Errorf("resolution record without domain, path or status")
	}
	rr := s.runs[rec.Run]
	if rr == nil {
		rr = &resRun{run: rec.Run, byStatus: map[string]map[string]int{}, addrs: map[string]map[string]struct{}{},
			pathIdx: map[string]int{}, domains: map[string][]domainRes{}}
		s.runs[rec.Run] = rr
	}
	if rr.byStatus[r.Path] == nil {
		rr.pathIdx[r.Path] = len(rr.paths)
		rr.paths = append(rr.paths, r.Path)
		rr.byStatus[r.Path] = map[string]int{}
		rr.addrs[r.Path] = map[string]struct{}{}
	}
	rr.byStatus[r.Path][r.Status]++
	if len(r.AnswersMapped) > 0 {
		if rr.synth == nil {
			rr.synth = map[string]int{}
		}
		rr.synth[r.Path]++
	}
	d := domainRes{ok: r.Status == "NOERROR"}
	if d.ok {
		as := slices.Clone(r.Answers)
		if len(r.AnswersMapped) > 0 {
			as = slices.Clone(r.AnswersMapped)
		}
		sort.Strings(as)
		as = slices.Compact(as)
		h := fnv.New64a()
		for _, a := range as {
			rr.addrs[r.Path][a] = struct{}{}
			h.Write([]byte(a))
			h.Write([]byte{0})
		}
		d.set = h.Sum64()
	}
	ds := rr.domains[r.Domain]
	i := rr.pathIdx[r.Path]
	if len(ds) <= i {
		ds = append(ds, make([]domainRes, i+1-len(ds))...)
	}
	ds[i] = d
	rr.domains[r.Domain] = ds
	return nil
}

func (s *resolution) Tables() []Table {
	if len(s.res) == 0 {
		return nil
	}
	res := Table{Name: "resolution", Title: "Resolution per path",
		Note:    "domains by DNS status on each path's own resolvers; resolved = NOERROR with an address",
		Columns: []string{"run", "path", "domains", "resolved", "failed", "by_status"}}
	ov := Table{Name: "overlap", Title: "Address overlap between the first two paths (004 §III)",
		Note:    "overlap = common / union of unique addresses; differ = domains resolved on both paths with different address sets, over all domains",
		Columns: []string{"run", "path_a", "path_b", "ips_a", "ips_b", "ips_common", "overlap_pct", "domains", "domains_differ_pct", "unresolved_somewhere_pct"}}
	res.Rows, ov.Rows = s.res, s.ov
	if slices.ContainsFunc(s.synth, func(n int) bool { return n > 0 }) {
		// Only a survey through a DNS64 has the column: others read as before.
		res.Note += "; synthesized = resolved domains answered with a DNS64's synthesized AAAA (counted as the IPv4 they embed)"
		res.Columns = append(res.Columns, "synthesized")
		res.Rows = nil
		for i, row := range s.res {
			res.Rows = append(res.Rows, append(slices.Clone(row), fmt.Sprint(s.synth[i])))
		}
	}
	return []Table{res, ov}
}

// EndRun makes the run's resolution and overlap rows and drops its maps.
func (s *resolution) EndRun(run *Run) {
	rr := s.runs[run]
	if rr == nil {
		return
	}
	delete(s.runs, run)
	res, ov := &Table{}, &Table{}
	{
		order := run.pathNames()
		pathOrder(order, rr.paths)
		for _, p := range rr.paths {
			n, ok := 0, rr.byStatus[p]["NOERROR"]
			var sts []string
			for st, c := range rr.byStatus[p] {
				n += c
				sts = append(sts, fmt.Sprintf("%s=%d", st, c))
			}
			sort.Strings(sts)
			res.Rows = append(res.Rows, []string{shortID(run), p, fmt.Sprint(n), fmt.Sprint(ok), fmt.Sprint(n - ok), strings.Join(sts, " ")})
			s.synth = append(s.synth, rr.synth[p])
		}
		if len(rr.paths) < 2 {
			s.res = append(s.res, res.Rows...)
			return
		}
		a, b := rr.paths[0], rr.paths[1]
		ia, ib := rr.pathIdx[a], rr.pathIdx[b]
		common := 0
		for ip := range rr.addrs[a] {
			if _, ok := rr.addrs[b][ip]; ok {
				common++
			}
		}
		differ, unresolved := 0, 0
		at := func(ds []domainRes, i int) domainRes {
			if i < len(ds) {
				return ds[i]
			}
			return domainRes{}
		}
		for _, d := range rr.domains {
			da, db := at(d, ia), at(d, ib)
			switch {
			case !da.ok || !db.ok:
				unresolved++
			case da.set != db.set:
				differ++
			}
		}
		na, nb := len(rr.addrs[a]), len(rr.addrs[b])
		ov.Rows = append(ov.Rows, []string{shortID(run), a, b, fmt.Sprint(na), fmt.Sprint(nb), fmt.Sprint(common),
			pct(common, na+nb-common), fmt.Sprint(len(rr.domains)), pct(differ, len(rr.domains)), pct(unresolved, len(rr.domains))})
	}
	s.res, s.ov = append(s.res, res.Rows...), append(s.ov, ov.Rows...)
}

// shortID names a run in tables: its run id's first block.
func shortID(r *Run) string {
	id, _, _ := strings.Cut(r.Header.RunID, "-")
	if id == "" {
		return r.File
	}
	return id
}
