package survey

import (
	"net/netip"
	"slices"
)

// computeSummaryRef is the in-memory summary computation that streaming
// replaced, kept as the reference the streaming one must equal.
func computeSummaryRef(in summaryInput) Summary {
	s := Summary{Type: "summary", Status: "ok", Resolution: []PathResolution{}, Cells: []Cell{}, Comparisons: []Comparison{}}
	addrSets := map[string]map[netip.Addr]struct{}{}
	for _, r := range in.ResolvePaths {
		pr := PathResolution{Path: r, ByStatus: map[string]int{}}
		set := map[netip.Addr]struct{}{}
		for _, d := range in.Res[r] {
			if !d.Done {
				continue
			}
			pr.Domains++
			pr.ByStatus[d.Status]++
			if d.Status == StatusNoError {
				pr.Resolved++
				for _, a := range d.Addrs {
					set[a] = struct{}{}
				}
			}
		}
		pr.Failed = pr.Domains - pr.Resolved
		s.Resolution = append(s.Resolution, pr)
		addrSets[r] = set
	}
	if len(in.ResolvePaths) >= 2 {
		s.Overlap = overlapRef(in, addrSets)
	} else if len(in.ResolvePaths) == 1 {
		s.Overlap = Overlap{PathA: in.ResolvePaths[0], IPsPathA: len(addrSets[in.ResolvePaths[0]])}
	}

	// domainRTT[c][d] is the RTT of domain d in cell c (NaN-free: ok flag).
	type drtt struct {
		v  float64
		ok bool
	}
	var cellRTT [][]drtt
	for pi, p := range in.Paths {
		for _, r := range in.ResolvePaths {
			c := Cell{ProbePath: p, ResolvePath: r}
			var medians []float64
			for a := range addrSets[r] {
				if !in.Allowed(p, r, a) {
					continue
				}
				tr, ok := in.Probe(pi, a)
				if !ok {
					continue
				}
				c.Targets++
				switch {
				case tr.Responsive:
					c.Responsive++
					medians = append(medians, tr.MedianMs)
				case tr.HostOverloaded:
					c.HostOverloaded++
				}
			}
			c.Unresponsive = c.Targets - c.Responsive - c.HostOverloaded
			if measured := c.Targets - c.HostOverloaded; measured > 0 {
				c.UnresponsivePct = 100 * float64(c.Unresponsive) / float64(measured)
			}
			c.RTTms = rttStats(medians)
			s.Cells = append(s.Cells, c)

			per := make([]drtt, in.Domains)
			for i, d := range in.Res[r] {
				if !d.Done || d.Status != StatusNoError {
					continue
				}
				for _, a := range d.Addrs {
					if !in.Allowed(p, r, a) {
						continue
					}
					if tr, ok := in.Probe(pi, a); ok && tr.Responsive && (!per[i].ok || tr.MedianMs < per[i].v) {
						per[i] = drtt{tr.MedianMs, true}
					}
				}
			}
			cellRTT = append(cellRTT, per)
		}
	}
	for i := range s.Cells {
		for j := i + 1; j < len(s.Cells); j++ {
			cmp := Comparison{A: s.Cells[i].ProbePath + "/" + s.Cells[i].ResolvePath,
				B: s.Cells[j].ProbePath + "/" + s.Cells[j].ResolvePath}
			var sum float64
			slower := 0
			for d := range in.Domains {
				a, b := cellRTT[i][d], cellRTT[j][d]
				if !a.ok || !b.ok {
					continue
				}
				cmp.Domains++
				sum += a.v - b.v
				if a.v > b.v+SlowerMarginMs {
					slower++
				}
			}
			if cmp.Domains > 0 {
				cmp.MeanDiffMs = sum / float64(cmp.Domains)
				cmp.ASlowerPct = 100 * float64(slower) / float64(cmp.Domains)
			}
			s.Comparisons = append(s.Comparisons, cmp)
		}
	}
	keys := make([]skipKey, 0, len(in.Skipped))
	for k := range in.Skipped {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b skipKey) int {
		pa, pb := slices.Index(in.Paths, a.probe), slices.Index(in.Paths, b.probe)
		if pa != pb {
			return pa - pb
		}
		ra, rb := slices.Index(in.ResolvePaths, a.resolve), slices.Index(in.ResolvePaths, b.resolve)
		if ra != rb {
			return ra - rb
		}
		if a.reason < b.reason {
			return -1
		}
		if a.reason > b.reason {
			return 1
		}
		return 0
	})
	for _, k := range keys {
		s.Skipped = append(s.Skipped, SkippedCount{ProbePath: k.probe, ResolvePath: k.resolve, Reason: k.reason, Count: in.Skipped[k]})
	}
	return s
}

func overlapRef(in summaryInput, sets map[string]map[netip.Addr]struct{}) Overlap {
	a, b := in.ResolvePaths[0], in.ResolvePaths[1]
	o := Overlap{PathA: a, PathB: b, IPsPathA: len(sets[a]), IPsPathB: len(sets[b])}
	for ip := range sets[a] {
		if _, ok := sets[b][ip]; ok {
			o.IPsCommon++
		}
	}
	if union := o.IPsPathA + o.IPsPathB - o.IPsCommon; union > 0 {
		o.OverlapPct = 100 * float64(o.IPsCommon) / float64(union)
	}
	if in.Domains == 0 {
		return o
	}
	differ, unresolved := 0, 0
	ra, rb := in.Res[a], in.Res[b]
	for d := range in.Domains {
		var da, db DomainResult
		if d < len(ra) {
			da = ra[d]
		}
		if d < len(rb) {
			db = rb[d]
		}
		okA := da.Done && da.Status == StatusNoError
		okB := db.Done && db.Status == StatusNoError
		if !okA || !okB {
			unresolved++
			continue
		}
		if !sameSetRef(da.Addrs, db.Addrs) {
			differ++
		}
	}
	o.DomainsDifferPct = 100 * float64(differ) / float64(in.Domains)
	o.DomainsUnresolvedSomewherePct = 100 * float64(unresolved) / float64(in.Domains)
	return o
}

func sameSetRef(a, b []netip.Addr) bool {
	ma := map[netip.Addr]struct{}{}
	for _, x := range a {
		ma[x] = struct{}{}
	}
	mb := map[netip.Addr]struct{}{}
	for _, x := range b {
		mb[x] = struct{}{}
		if _, ok := ma[x]; !ok {
			return false
		}
	}
	return len(ma) == len(mb)
}
