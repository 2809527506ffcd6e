package analysis

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// multipathTransports pool several paths in one transfer; the findings
// compare each with the best transport that uses one path (study 003's
// aggregation rate: multipath goodput over the best single path's).
var multipathTransports = []string{"mptcp", "mpquic", "mphttp"}

// findingsTable leads a report with its answer, one line per headline,
// computed from the tables the sections made (so it can never disagree
// with them): per path the network causes run diagnosed; per survey cell the unresponsive share and median RTT; per
// mode, pattern and transport the best goodput and, for a multipath
// transport, its ratio to the best single-path transport; per mobile
// transport the median maximum delay and why the backup was used.
func findingsTable(tables []Table) Table {
	t := Table{Name: "findings", Title: "Findings",
		Note:    "the headlines of the tables below, computed from them; each line names the table it comes from",
		Columns: []string{"subject", "finding", "from"}}
	byName := map[string]Table{}
	for _, tb := range tables {
		byName[tb.Name] = tb
	}
	// What the network did leads: it qualifies every figure below.
	t.Rows = append(t.Rows, causeFindings(byName["network-causes"])...)
	t.Rows = append(t.Rows, cellFindings(byName)...)
	t.Rows = append(t.Rows, goodputFindings(byName["pattern-metrics"])...)
	t.Rows = append(t.Rows, mobileFindings(byName["max-delay-cdf"], byName["mobile-causes"])...)
	return t
}

func cellFindings(by map[string]Table) [][]string {
	un, ok := by["unresponsive"]
	if !ok {
		return nil
	}
	var rows [][]string
	if st, ok := by["stopped-paths"]; ok {
		// A stopped path has no cells at all in those runs: that
		// qualifies every cell line below, so it comes first.
		for r := range st.All() {
			rows = append(rows, []string{"path " + st.cell(r, "path"),
				fmt.Sprintf("survey stopped at start in %s of %s runs (%s): no cell measured through it there", st.cell(r, "runs"), st.cell(r, "of_runs"), st.cell(r, "why")), "stopped-paths"})
		}
	}
	if n, ok := by["nat64"]; ok {
		// Behind a NAT64 every IPv4 figure of the path crossed a
		// translator: that qualifies the cells, so it comes first.
		for r := range n.All() {
			rows = append(rows, []string{"path " + n.cell(r, "path"),
				fmt.Sprintf("IPv6-only behind NAT64 %s: %s IPv4 targets probed through the translator, %s answered (%s%%)",
					n.cell(r, "nat64_prefix"), n.cell(r, "targets"), n.cell(r, "responsive"), n.cell(r, "responsive_pct")), "nat64"})
		}
	}
	if res, ok := by["resolution"]; ok && slices.Contains(res.Columns, "synthesized") {
		for r := range res.All() {
			if n := res.cell(r, "synthesized"); n != "0" {
				rows = append(rows, []string{"path " + res.cell(r, "path"),
					fmt.Sprintf("%s of %s resolved domains answered by a DNS64 (synthesized AAAA, counted as the IPv4 they embed)", n, res.cell(r, "resolved")), "resolution"})
			}
		}
	}
	rtt := by["rtt"]
	median := map[[2]string][2]string{} // cell, route -> p50, n
	for r := range rtt.All() {
		route := rtt.cell(r, "route")
		if route == "" {
			route = "direct"
		}
		median[[2]string{rtt.cell(r, "cell"), route}] = [2]string{rtt.cell(r, "p50"), rtt.cell(r, "n")}
	}
	for r := range un.All() {
		cell, letters := un.cell(r, "cell"), un.cell(r, "study_cell")
		subject := "cell " + cell
		if letters != "" {
			subject = "cell " + letters + " (" + cell + ")"
		}
		f := fmt.Sprintf("%s of %s targets unresponsive (%s%%)", un.cell(r, "unresponsive"), un.cell(r, "targets"), un.cell(r, "unresponsive_pct"))
		if m, ok := median[[2]string{cell, "direct"}]; ok && m[1] != "0" {
			f += fmt.Sprintf("; median RTT %s ms over %s responsive targets", m[0], m[1])
		}
		if v := un.cell(r, "via_nat64_responsive"); v != "" && un.cell(r, "via_nat64") != "0" {
			f += fmt.Sprintf("; %s%% of its targets reached via NAT64", pctOf(v, un.cell(r, "targets")))
			if m, ok := median[[2]string{cell, routeViaNAT64}]; ok && m[1] != "0" {
				f += fmt.Sprintf(" (median RTT %s ms)", m[0])
			}
		}
		rows = append(rows, []string{subject, f, "unresponsive, rtt"})
	}
	return rows
}

// pctOf is pct of two printed counts.
func pctOf(n, of string) string {
	a, _ := strconv.Atoi(n)
	b, _ := strconv.Atoi(of)
	return pct(a, b)
}

// goodputFindings reads pattern-metrics rows: mode, pattern, transport,
// family, path, tests, metric, n, min, p10, p25, median, ...
func goodputFindings(pm Table) [][]string {
	type best struct {
		mbps  float64
		where string // family and path of the best row
		tests string
	}
	type group struct{ mode, pattern, metric string }
	bests := map[group]map[string]best{}
	var groups []group
	for r := range pm.All() {
		metric, tr := pm.cell(r, "metric"), pm.cell(r, "transport")
		if !strings.HasSuffix(metric, "goodput_mbps") {
			continue
		}
		v, err := strconv.ParseFloat(pm.cell(r, "median"), 64)
		if err != nil {
			continue
		}
		g := group{pm.cell(r, "mode"), pm.cell(r, "pattern"), metric}
		if bests[g] == nil {
			bests[g] = map[string]best{}
			groups = append(groups, g)
		}
		if b, ok := bests[g][tr]; !ok || v > b.mbps {
			bests[g][tr] = best{v, pm.cell(r, "family") + " " + pm.cell(r, "path"), pm.cell(r, "tests")}
		}
	}
	slices.SortFunc(groups, func(a, b group) int {
		return cmp.Or(cmp.Compare(a.mode, b.mode), cmp.Compare(a.pattern, b.pattern), cmp.Compare(a.metric, b.metric))
	})
	var rows [][]string
	for _, g := range groups {
		trs := make([]string, 0, len(bests[g]))
		for tr := range bests[g] {
			trs = append(trs, tr)
		}
		slices.Sort(trs)
		single, singleTr := 0.0, ""
		for _, tr := range trs {
			if b := bests[g][tr]; !slices.Contains(multipathTransports, tr) && b.mbps > single {
				single, singleTr = b.mbps, tr
			}
		}
		what := strings.TrimSuffix(strings.ReplaceAll(g.metric, "_", " "), " mbps")
		for _, tr := range trs {
			b := bests[g][tr]
			f := fmt.Sprintf("%s %s: median %.1f Mbit/s (%s, %s)", g.pattern, what, b.mbps, b.where, plural(b.tests, "test"))
			if slices.Contains(multipathTransports, tr) && single > 0 {
				f += fmt.Sprintf("; %.2fx the best single-path transport (%s, %.1f Mbit/s)", b.mbps/single, singleTr, single)
			}
			rows = append(rows, []string{tr + " (" + g.mode + ")", f, "pattern-metrics"})
		}
	}
	return rows
}

// mobileFindings: the exact ECDF's median (its first step at or past 0.5)
// of each transport's maximum delay per direction, and the causes table.
func mobileFindings(cdf, causes Table) [][]string {
	type key struct{ transport, dir string }
	med := map[key]string{}
	var trs []string
	for r := range cdf.All() {
		tr := cdf.cell(r, "transport")
		k := key{tr, cdf.cell(r, "direction")}
		if _, done := med[k]; done {
			continue
		}
		if p, err := strconv.ParseFloat(cdf.cell(r, "cdf"), 64); err == nil && p >= 0.5 {
			med[k] = cdf.cell(r, "max_delay_s")
			if !slices.Contains(trs, tr) {
				trs = append(trs, tr)
			}
		}
	}
	why := map[string][]string{}
	for r := range causes.All() {
		tr, n := causes.cell(r, "transport"), causes.cell(r, "tests")
		if n != "0" {
			why[tr] = append(why[tr], fmt.Sprintf("%s %s (%s%%)", causes.cell(r, "cause"), n, causes.cell(r, "pct")))
			if !slices.Contains(trs, tr) {
				trs = append(trs, tr)
			}
		}
	}
	slices.Sort(trs)
	var rows [][]string
	for _, tr := range trs {
		var parts []string
		for _, d := range []string{"upload", "download"} {
			if v, ok := med[key{tr, d}]; ok {
				parts = append(parts, fmt.Sprintf("median max delay %s %s s", d, v))
			}
		}
		if c := why[tr]; len(c) > 0 {
			parts = append(parts, "backup first used for: "+strings.Join(c, ", "))
		}
		rows = append(rows, []string{tr + " (mobile)", strings.Join(parts, "; "), "max-delay-cdf, mobile-causes"})
	}
	return rows
}

func plural(n, what string) string {
	if n == "1" {
		return n + " " + what
	}
	return n + " " + what + "s"
}

// cell is row's value in the column named name ("" when the table has no
// such column): the findings read the sections' tables by column name, so
// a column added to a table cannot shift what they read.
func (t Table) cell(row []string, name string) string {
	if i := slices.Index(t.Columns, name); i >= 0 && i < len(row) {
		return row[i]
	}
	return ""
}
