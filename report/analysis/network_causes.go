package analysis

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// The network's part in failed tests: each `run` record whose diagnosis
// named a cause (udp-blocked:PORT, udp-interfered:PORT, v6-blackhole,
// mptcp-stripped, mptcp-not-offered, portal, pmtu-blackhole) counted per primary path, cause and family, with
// the transports it hit. The findings lead with these rows.
func init() {
	register(31, "network-causes", func() Section { return &netCauses{by: map[causeKey]*causeAgg{}} })
}

type causeKey struct {
	path, cause string
	family      int
}

type causeAgg struct {
	tests      int
	transports []string
}

type netCauses struct {
	by map[causeKey]*causeAgg
}

func (*netCauses) AppliesTo(cmd string) bool { return cmd == "run" }

func (*netCauses) Types() []string { return []string{"pattern_test"} }

func (s *netCauses) Add(rec Record) error {
	if rec.Type != "pattern_test" {
		return nil
	}
	var r struct {
		Config struct {
			Transport string `json:"transport"`
			Path      string `json:"path"`
			Family    int    `json:"family"`
		} `json:"config"`
		Cause string `json:"cause"`
	}
	if err := decode(rec, &r); err != nil {
		return err
	}
	if r.Cause == "" {
		return nil
	}
	k := causeKey{r.Config.Path, r.Cause, r.Config.Family}
	a := s.by[k]
	if a == nil {
		a = &causeAgg{}
		s.by[k] = a
	}
	a.tests++
	if !slices.Contains(a.transports, r.Config.Transport) {
		a.transports = append(a.transports, r.Config.Transport)
		slices.Sort(a.transports)
	}
	return nil
}

func (s *netCauses) Tables() []Table {
	if len(s.by) == 0 {
		return nil
	}
	keys := make([]causeKey, 0, len(s.by))
	for k := range s.by {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b causeKey) int {
		return cmp.Or(cmp.Compare(a.path, b.path), cmp.Compare(a.cause, b.cause), cmp.Compare(a.family, b.family))
	})
	t := Table{Name: "network-causes", Title: "What the network did (run's diagnosis of failed tests)",
		Note:    "tests whose failure (or MPTCP fallback) a probe after the test put down to the network, per primary path, cause and family; see README \"Real networks\" for how each is measured",
		Columns: []string{"path", "cause", "family", "tests", "transports"}}
	for _, k := range keys {
		a := s.by[k]
		t.Rows = append(t.Rows, []string{k.path, k.cause, fmt.Sprint(k.family), fmt.Sprint(a.tests), strings.Join(a.transports, " ")})
	}
	return []Table{t}
}

// causeMeaning says what a cause means, for the findings.
func causeMeaning(cause string) string {
	switch {
	case strings.HasPrefix(cause, "udp-interfered:"):
		return "UDP port " + strings.TrimPrefix(cause, "udp-interfered:") + " cut after the handshake (the alternate port works)"
	case strings.HasPrefix(cause, "udp-blocked:"):
		return "UDP port " + strings.TrimPrefix(cause, "udp-blocked:") + " blocked (the alternate port works)"
	case cause == "v6-blackhole":
		return "IPv6 black-holed (IPv4 to the same server works)"
	case cause == "mptcp-stripped":
		return "MPTCP options stripped on the path (another path negotiates MPTCP)"
	case cause == "mptcp-not-offered":
		return "the server did not offer MPTCP on any path"
	case cause == "portal":
		return "a captive portal answers in the servers' place"
	case cause == "pmtu-blackhole":
		return "path-MTU black hole (TLS over TCP completes only with small segments)"
	}
	return cause
}

// causeFindings: one line per path and cause, families pooled.
func causeFindings(t Table) [][]string {
	type pc struct{ path, cause string }
	var order []pc
	tests := map[pc]int{}
	fams := map[pc][]string{}
	trs := map[pc][]string{}
	for r := range t.All() {
		k := pc{t.cell(r, "path"), t.cell(r, "cause")}
		if _, ok := tests[k]; !ok {
			order = append(order, k)
		}
		var n int
		fmt.Sscan(t.cell(r, "tests"), &n)
		tests[k] += n
		fams[k] = append(fams[k], "IPv"+t.cell(r, "family"))
		for _, tr := range strings.Fields(t.cell(r, "transports")) {
			if !slices.Contains(trs[k], tr) {
				trs[k] = append(trs[k], tr)
			}
		}
	}
	var rows [][]string
	for _, k := range order {
		slices.Sort(trs[k])
		f := fmt.Sprintf("%s: %s over %s (%s)", causeMeaning(k.cause), plural(fmt.Sprint(tests[k]), "test"), strings.Join(fams[k], ", "), strings.Join(trs[k], ", "))
		rows = append(rows, []string{k.path, f, "network-causes"})
	}
	return rows
}
