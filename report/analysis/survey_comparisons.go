package analysis

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Cell comparisons (study 004 §III: "WW vs WL about 40 ms", "LL slower
// than LW for 60% of the domains"), as survey.Summary defines them: a
// domain's RTT in a cell is the lowest median among its responsive
// addresses there; for cells A before B, over the domains with an RTT in
// both, the mean of rttA-rttB and the share of domains where A is slower
// by more than slowerMarginMs. Runs combined pool their domains.
func init() {
	register(25, "comparisons", func() Section { return &comparisons{runs: map[*Run]*cmpRun{}} })
}

// slowerMarginMs is survey.SlowerMarginMs: differences within it are ties.
const slowerMarginMs = 0.5

type probed struct {
	median  float64
	resolve uint64 // bit i: the cell with resolve path i holds this measurement
	via     bool   // probed through the probe path's NAT64 (route via-nat64)
}

// cmpRun holds what the comparisons need of one run, compactly: every
// address and path is interned, a domain's answers are address ids per
// resolve path, a measurement is keyed by probe path and address id.
type cmpRun struct {
	run     *Run
	paths   map[string]int
	names   []string
	addrs   map[string]uint32
	domains map[string]uint32 // domain -> id
	answers [][][]uint32      // domain id -> resolve path index -> address ids (NOERROR only)
	probes  map[uint64]probed // probe path index << 32 | address id; responsive, valid targets only
}

func (cr *cmpRun) path(name string) (int, error) {
	i, ok := cr.paths[name]
	if !ok {
		if len(cr.names) == 64 {
			return 0, fmt.Errorf("more than 64 paths")
		}
		i = len(cr.names)
		cr.paths[name] = i
		cr.names = append(cr.names, name)
	}
	return i, nil
}

func (cr *cmpRun) addr(a string) uint32 {
	id, ok := cr.addrs[a]
	if !ok {
		id = uint32(len(cr.addrs))
		cr.addrs[a] = id
	}
	return id
}

// comparisons keeps one run's maps while it is read; at its end the run
// is folded into the pooled per-pair sums and dropped, so a fleet's
// surveys cost the sums, not every run's domains.
type comparisons struct {
	runs      map[*Run]*cmpRun
	pairs     map[[3]string]*pairAgg // a, b, route ("" direct, via-nat64)
	pairOrder [][3]string
}

func (c *comparisons) AppliesTo(cmd string) bool { return cmd == "survey" }

func (*comparisons) Types() []string { return []string{"resolution", "probe"} }

func (c *comparisons) Add(rec Record) error {
	cr := c.runs[rec.Run]
	if cr == nil {
		cr = &cmpRun{run: rec.Run, paths: map[string]int{}, addrs: map[string]uint32{}, domains: map[string]uint32{}, probes: map[uint64]probed{}}
		c.runs[rec.Run] = cr
	}
	switch rec.Type {
	case "resolution":
		r, err := decoded[resolutionRecord](rec)
		if err != nil {
			return err
		}
		if r.Status != "NOERROR" || len(r.Answers) == 0 {
			return nil
		}
		pi, err := cr.path(r.Path)
		if err != nil {
			return err
		}
		di, ok := cr.domains[r.Domain]
		if !ok {
			di = uint32(len(cr.answers))
			cr.domains[r.Domain] = di
			cr.answers = append(cr.answers, nil)
		}
		ds := cr.answers[di]
		if len(ds) <= pi {
			ds = append(ds, make([][]uint32, pi+1-len(ds))...)
		}
		ids := make([]uint32, len(r.Answers))
		for i, a := range r.Answers {
			ids[i] = cr.addr(a)
		}
		ds[pi] = ids
		cr.answers[di] = ds
	case "probe":
		r, err := decoded[probeRecord](rec)
		if err != nil {
			return err
		}
		if !r.Valid || !r.Responsive {
			return nil
		}
		pi, err := cr.path(r.ProbePath)
		if err != nil {
			return err
		}
		p := probed{median: r.median(), via: r.Route == routeViaNAT64}
		for _, rp := range r.resolvePaths() {
			ri, err := cr.path(rp)
			if err != nil {
				return err
			}
			p.resolve |= 1 << ri
		}
		cr.probes[uint64(pi)<<32|uint64(cr.addr(r.Address))] = p
	}
	return nil
}

type pairAgg struct {
	domains, slower int
	sum             float64
}

// EndRun folds the run's domains into the pooled pairs.
func (c *comparisons) EndRun(run *Run) {
	cr := c.runs[run]
	if cr == nil {
		return
	}
	delete(c.runs, run)
	if c.pairs == nil {
		c.pairs = map[[3]string]*pairAgg{}
	}
	pairs := c.pairs
	{
		var probes, resolves []string
		seenProbe, seenResolve := uint64(0), uint64(0)
		for k, p := range cr.probes {
			seenProbe |= 1 << (k >> 32)
			seenResolve |= p.resolve
		}
		for i, n := range cr.names {
			if seenProbe&(1<<i) != 0 {
				probes = append(probes, n)
			}
			if seenResolve&(1<<i) != 0 {
				resolves = append(resolves, n)
			}
		}
		order := run.pathNames()
		pathOrder(order, probes)
		pathOrder(order, resolves)
		// A domain's RTT in a cell per route: direct, or through the
		// probe path's NAT64; the two are never compared with each other.
		type cellRTT struct {
			name   string
			rtt    [2][]float64 // route (0 direct, 1 via-nat64) -> by domain id; NaN: none
			hasVia bool
		}
		var cells []cellRTT
		for _, p := range probes {
			pi := uint64(cr.paths[p])
			for _, r := range resolves {
				ri := cr.paths[r]
				cell := cellRTT{name: CellName(p, r), rtt: [2][]float64{make([]float64, len(cr.answers)), make([]float64, len(cr.answers))}}
				for d, byPath := range cr.answers {
					cell.rtt[0][d], cell.rtt[1][d] = math.NaN(), math.NaN()
					if ri >= len(byPath) {
						continue
					}
					for _, a := range byPath[ri] {
						pr, ok := cr.probes[pi<<32|uint64(a)]
						if !ok || pr.resolve&(1<<ri) == 0 {
							continue
						}
						rt := 0
						if pr.via {
							rt, cell.hasVia = 1, true
						}
						if v := cell.rtt[rt][d]; math.IsNaN(v) || pr.median < v {
							cell.rtt[rt][d] = pr.median
						}
					}
				}
				cells = append(cells, cell)
			}
		}
		for rt, route := range []string{"", routeViaNAT64} {
			for i := range cells {
				for j := i + 1; j < len(cells); j++ {
					if rt == 1 && (!cells[i].hasVia || !cells[j].hasVia) {
						continue
					}
					k := [3]string{cells[i].name, cells[j].name, route}
					pa := pairs[k]
					if pa == nil {
						pa = &pairAgg{}
						pairs[k] = pa
						c.pairOrder = append(c.pairOrder, k)
					}
					for d, a := range cells[i].rtt[rt] {
						b := cells[j].rtt[rt][d]
						if math.IsNaN(a) || math.IsNaN(b) {
							continue
						}
						pa.domains++
						pa.sum += a - b
						if a > b+slowerMarginMs {
							pa.slower++
						}
					}
				}
			}
		}
	}
}

func (c *comparisons) Tables() []Table {
	pairs, pairOrder := c.pairs, c.pairOrder
	if len(pairOrder) == 0 {
		return nil
	}
	t := Table{Name: "comparisons", Title: "Cell comparisons (004 §III)",
		Note:    fmt.Sprintf("a domain's RTT in a cell is the lowest median of its responsive addresses there; over domains with an RTT in both cells: mean of a-b and the share where a is slower by more than %.1f ms", slowerMarginMs),
		Columns: []string{"a", "b", "domains", "mean_diff_ms", "a_slower_pct"}}
	via := slices.ContainsFunc(pairOrder, func(k [3]string) bool { return k[2] != "" })
	if via {
		t.Note += "; route: direct (targets probed directly), or via-nat64 (both cells' RTTs through the probe path's NAT64): a domain's direct and translated RTTs are never compared"
		t.Columns = append(t.Columns, "route")
	}
	// Direct pairs first, then the translated ones, each in first-seen order.
	order := slices.Clone(pairOrder)
	slices.SortStableFunc(order, func(a, b [3]string) int { return strings.Compare(a[2], b[2]) })
	for _, k := range order {
		pa := pairs[k]
		mean := 0.0
		if pa.domains > 0 {
			mean = pa.sum / float64(pa.domains)
		}
		row := []string{k[0], k[1], fmt.Sprint(pa.domains), ms(mean), pct(pa.slower, pa.domains)}
		if via {
			row = append(row, cmp.Or(k[2], "direct"))
		}
		t.Rows = append(t.Rows, row)
	}
	return []Table{t}
}
