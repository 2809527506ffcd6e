package analysis

import (
	"cmp"
	"fmt"
	"slices"
)

// Mobile mode (study 000 §IV-A, §IV-B), read from a run's mobile_summary
// records (one per mobile run: every handover transport side by side):
// Table I (why the backup path was first used), Fig. 6 (handover duration
// from the first data on the backup path to the primary's last activity,
// negative when abrupt), Fig. 7 (maximum application delay per direction)
// and Fig. 8 (MPTCP's maximum delay over each other transport's in the same
// run: the ratio's ECDF and the upload scatter). The section is driven by
// what the records carry: a field that is absent leaves its table out.
func init() {
	register(40, "mobile", func() Section { return &mobileSec{by: map[string]*mobileAgg{}} })
}

type mobileRecord struct {
	Transports []struct {
		Transport string `json:"transport"`
		Status    string `json:"status"`
		Handover  struct {
			Status           string `json:"status"`
			DurationSent     *int64 `json:"duration_sent_ns"`
			DurationReceived *int64 `json:"duration_received_ns"`
			Cause            string `json:"cause"`
		} `json:"handover"`
		Upload   mobileDelays `json:"upload_delays"`
		Download mobileDelays `json:"download_delays"`
	} `json:"transports"`
	Ratios []struct {
		Other    string   `json:"other"`
		Upload   *float64 `json:"upload"`
		Download *float64 `json:"download"`
	} `json:"mptcp_max_delay_ratios"`
}

type mobileDelays struct {
	Count int    `json:"count"`
	Max   *int64 `json:"max_ns"`
}

type mobileAgg struct {
	tests              int
	status, causes     map[string]int
	durSent, durRecv   []float64 // s
	maxUp, maxDown     []float64 // s
	ratioUp, ratioDown []float64
	// Fig. 8b: MPTCP's and this transport's upload max delay in one run.
	scatterX, scatterY []float64
}

type mobileSec struct {
	by map[string]*mobileAgg
}

func (*mobileSec) AppliesTo(cmd string) bool { return cmd == "run" }

func (*mobileSec) Types() []string { return []string{"mobile_summary"} }

func (m *mobileSec) agg(tr string) *mobileAgg {
	a := m.by[tr]
	if a == nil {
		a = &mobileAgg{status: map[string]int{}, causes: map[string]int{}}
		m.by[tr] = a
	}
	return a
}

func nsS(ns int64) float64 { return float64(ns) / 1e9 }

func (m *mobileSec) Add(rec Record) error {
	var r mobileRecord
	if err := decode(rec, &r); err != nil {
		return err
	}
	upMax := map[string]float64{}
	for _, t := range r.Transports {
		if t.Transport == "" {
			return fmt.Errorf("mobile_summary transport without a name")
		}
		a := m.agg(t.Transport)
		a.tests++
		h := t.Handover
		st := h.Status
		if st == "" {
			st = "unknown"
		}
		a.status[st]++
		if h.Status == "handover" {
			cause := h.Cause
			if cause == "" {
				cause = "(not given)"
			}
			a.causes[cause]++
			if h.DurationSent != nil {
				a.durSent = append(a.durSent, nsS(*h.DurationSent))
			}
			if h.DurationReceived != nil {
				a.durRecv = append(a.durRecv, nsS(*h.DurationReceived))
			}
		}
		if t.Upload.Max != nil && t.Upload.Count > 0 {
			a.maxUp = append(a.maxUp, nsS(*t.Upload.Max))
			upMax[t.Transport] = nsS(*t.Upload.Max)
		}
		if t.Download.Max != nil && t.Download.Count > 0 {
			a.maxDown = append(a.maxDown, nsS(*t.Download.Max))
		}
	}
	for _, q := range r.Ratios {
		if q.Other == "" {
			continue
		}
		a := m.agg(q.Other)
		if q.Upload != nil && *q.Upload > 0 {
			a.ratioUp = append(a.ratioUp, *q.Upload)
		}
		if q.Download != nil && *q.Download > 0 {
			a.ratioDown = append(a.ratioDown, *q.Download)
		}
		x, okx := upMax["mptcp"]
		y, oky := upMax[q.Other]
		if okx && oky {
			a.scatterX, a.scatterY = append(a.scatterX, x), append(a.scatterY, y)
		}
	}
	return nil
}

func (m *mobileSec) transports() []string {
	var ts []string
	for t := range m.by {
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(a, b string) int { // MPTCP first: the ratios' numerator
		return cmp.Or(cmp.Compare(boolInt(a != "mptcp"), boolInt(b != "mptcp")), cmp.Compare(a, b))
	})
	return ts
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// mobileSeries are a transport's samples shown as ECDFs: name, values.
type mobileSeries struct {
	table, what string
	get         func(*mobileAgg) []float64
}

var mobileECDFs = []mobileSeries{
	{"handover-duration-cdf", "received", func(a *mobileAgg) []float64 { return a.durRecv }},
	{"handover-duration-cdf", "sent", func(a *mobileAgg) []float64 { return a.durSent }},
	{"max-delay-cdf", "upload", func(a *mobileAgg) []float64 { return a.maxUp }},
	{"max-delay-cdf", "download", func(a *mobileAgg) []float64 { return a.maxDown }},
	{"mobile-ratio-cdf", "upload", func(a *mobileAgg) []float64 { return a.ratioUp }},
	{"mobile-ratio-cdf", "download", func(a *mobileAgg) []float64 { return a.ratioDown }},
}

func (m *mobileSec) Tables() []Table {
	if len(m.by) == 0 {
		return nil
	}
	causes := Table{Name: "mobile-causes", Title: "Why the backup path was first used (000 Table I)",
		Note:    "handover tests only; rtt-threshold: primary smoothed RTT over the threshold, under-rto: primary in RTO with data to send, rto-threshold: primary RTO over the threshold, other: none of these",
		Columns: []string{"transport", "cause", "tests", "pct"}}
	status := Table{Name: "mobile-status", Title: "Mobile tests by handover status (000 §IV)",
		Note:    "handover: the backup path carried data; no-handover: a backup existed and never did; no-backup: no backup path was seen",
		Columns: []string{"transport", "tests", "by_status"}}
	cdfs := map[string]*Table{
		"handover-duration-cdf": {Name: "handover-duration-cdf", Title: "Handover duration ECDF (000 Fig. 6), exact", Long: true,
			Note:    "from the first data on the backup path to the primary's last packet received (or sent); negative: the primary had stopped before (abrupt)",
			Columns: []string{"transport", "end", "duration_s", "cdf"}},
		"max-delay-cdf": {Name: "max-delay-cdf", Title: "Maximum application delay ECDF (000 Fig. 7), exact", Long: true,
			Note:    "the interactive pattern's largest delay per test and direction",
			Columns: []string{"transport", "direction", "max_delay_s", "cdf"}},
		"mobile-ratio-cdf": {Name: "mobile-ratio-cdf", Title: "MPTCP / other max-delay ratio ECDF (000 Fig. 8a), exact", Long: true,
			Note:    "MPTCP's maximum delay over the other transport's in the same mobile run; above 1: the other did better",
			Columns: []string{"other", "direction", "ratio", "cdf"}},
	}
	for _, tr := range m.transports() {
		a := m.by[tr]
		if a.tests > 0 {
			status.Rows = append(status.Rows, []string{tr, fmt.Sprint(a.tests), counts(a.status)})
		}
		n := 0
		for _, c := range a.causes {
			n += c
		}
		for _, c := range []string{"rtt-threshold", "under-rto", "rto-threshold", "other"} {
			if n > 0 {
				causes.Rows = append(causes.Rows, []string{tr, c, fmt.Sprint(a.causes[c]), pct(a.causes[c], n)})
			}
		}
		var extra []string
		for c := range a.causes {
			if !slices.Contains([]string{"rtt-threshold", "under-rto", "rto-threshold", "other"}, c) {
				extra = append(extra, c)
			}
		}
		slices.Sort(extra)
		for _, c := range extra {
			causes.Rows = append(causes.Rows, []string{tr, c, fmt.Sprint(a.causes[c]), pct(a.causes[c], n)})
		}
		for _, s := range mobileECDFs {
			vals, fr := ECDF(s.get(a))
			t := cdfs[s.table]
			for i := range vals {
				t.Rows = append(t.Rows, []string{tr, s.what, fmt.Sprintf("%.3f", vals[i]), fmt.Sprintf("%.6f", fr[i])})
			}
		}
	}
	return []Table{status, causes, *cdfs["handover-duration-cdf"], *cdfs["max-delay-cdf"], *cdfs["mobile-ratio-cdf"]}
}

func (m *mobileSec) Figures() []Figure {
	if len(m.by) == 0 {
		return nil
	}
	figs := map[string]*Figure{
		"handover-duration-cdf": {Name: "handover-duration-cdf", Title: "Handover duration (000 Fig. 6)", Kind: KindECDF, XLabel: "duration (s)", YLabel: "ECDF"},
		"max-delay-cdf":         {Name: "max-delay-cdf", Title: "Maximum application delay (000 Fig. 7)", Kind: KindECDF, XLabel: "max delay (s)", YLabel: "ECDF", LogX: true},
		"mobile-ratio-cdf":      {Name: "mobile-ratio-cdf", Title: "MPTCP / other max delay (000 Fig. 8a)", Kind: KindECDF, XLabel: "ratio", YLabel: "ECDF", LogX: true},
	}
	scatter := Figure{Name: "mobile-upload-scatter", Title: "Upload max delay, MPTCP vs other, per run (000 Fig. 8b)", Kind: KindPoints,
		XLabel: "MPTCP max delay (s)", YLabel: "other max delay (s)"}
	for _, tr := range m.transports() {
		a := m.by[tr]
		for _, s := range mobileECDFs {
			if xs := s.get(a); len(xs) > 0 {
				figs[s.table].Series = append(figs[s.table].Series, ecdfSeries(tr+" "+s.what, xs))
			}
		}
		if len(a.scatterX) > 0 {
			scatter.Series = append(scatter.Series, Series{Name: tr, X: a.scatterX, Y: a.scatterY})
		}
	}
	return []Figure{*figs["handover-duration-cdf"], *figs["max-delay-cdf"], *figs["mobile-ratio-cdf"], scatter}
}
