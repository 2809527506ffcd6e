package analysis_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/report/analysis"
)

// TestMobileTablesEqualPlanted: mobile mode's tables from planted
// mobile_summary records (the shape the mobile branch writes; no lab run:
// mobile mode is built in parallel this session): Table I's causes among
// handover tests, exact ECDFs of handover duration (Fig. 6), max delay per
// direction (Fig. 7) and the MPTCP/other ratio (Fig. 8a), the upload
// scatter (Fig. 8b); absent fields (a run without a backup, no ratios, an
// empty record) leave rows out rather than failing or counting zeros.
func TestMobileTablesEqualPlanted(t *testing.T) {
	dir := t.TempDir()
	s := func(x float64) string { return intStr(int64(x * 1e9)) }
	tr := func(name, status, cause string, recv, sent, up, down string) string {
		h := `"status":"` + status + `"`
		if cause != "" {
			h += `,"cause":"` + cause + `"`
		}
		if recv != "" {
			h += `,"duration_received_ns":` + recv
		}
		if sent != "" {
			h += `,"duration_sent_ns":` + sent
		}
		out := `{"transport":"` + name + `","status":"success","handover":{` + h + `}`
		if up != "" {
			out += `,"upload_delays":{"count":100,"max_ns":` + up + `}`
		}
		if down != "" {
			out += `,"download_delays":{"count":100,"max_ns":` + down + `}`
		}
		return out + "}"
	}
	rec := func(trs, ratios string) string {
		return `{"type":"mobile_summary","primary":"wlan0","backup":"wwan0","transports":[` + trs + `]` + ratios + `}`
	}
	a := runDoc(t, dir, "m1.json",
		rec(tr("mptcp", "handover", "under-rto", s(12), s(10), s(2.5), s(3))+","+tr("quic", "handover", "other", s(-1), "", s(1), s(4)),
			`,"mptcp_max_delay_ratios":[{"other":"quic","upload":2.5,"download":0.75}]`),
		rec(tr("mptcp", "handover", "rtt-threshold", s(0.5), "", s(6), s(1))+","+tr("quic", "no-handover", "", "", "", s(3), s(2)),
			`,"mptcp_max_delay_ratios":[{"other":"quic","upload":2,"download":0.5}]`),
	)
	b := runDoc(t, dir, "m22.json",
		rec(tr("mptcp", "no-backup", "", "", "", "", ""), ""),
		rec("", ""),
	)
	rep, err := analysis.Analyze(analysis.Files(a, b))
	require.NoError(t, err)
	assert.Equal(t, [][]string{
		{"mptcp", "3", "handover=2 no-backup=1"},
		{"quic", "2", "handover=1 no-handover=1"},
	}, rowsOf(t, rep, "mobile-status"))
	assert.Equal(t, [][]string{
		{"mptcp", "rtt-threshold", "1", "50.00"}, {"mptcp", "under-rto", "1", "50.00"},
		{"mptcp", "rto-threshold", "0", "0.00"}, {"mptcp", "other", "0", "0.00"},
		{"quic", "rtt-threshold", "0", "0.00"}, {"quic", "under-rto", "0", "0.00"},
		{"quic", "rto-threshold", "0", "0.00"}, {"quic", "other", "1", "100.00"},
	}, rowsOf(t, rep, "mobile-causes"))
	assert.Equal(t, [][]string{
		{"mptcp", "received", "0.500", "0.500000"}, {"mptcp", "received", "12.000", "1.000000"},
		{"mptcp", "sent", "10.000", "1.000000"},
		{"quic", "received", "-1.000", "1.000000"},
	}, rowsOf(t, rep, "handover-duration-cdf"))
	assert.Equal(t, [][]string{
		{"mptcp", "upload", "2.500", "0.500000"}, {"mptcp", "upload", "6.000", "1.000000"},
		{"mptcp", "download", "1.000", "0.500000"}, {"mptcp", "download", "3.000", "1.000000"},
		{"quic", "upload", "1.000", "0.500000"}, {"quic", "upload", "3.000", "1.000000"},
		{"quic", "download", "2.000", "0.500000"}, {"quic", "download", "4.000", "1.000000"},
	}, rowsOf(t, rep, "max-delay-cdf"))
	assert.Equal(t, [][]string{
		{"quic", "upload", "2.000", "0.500000"}, {"quic", "upload", "2.500", "1.000000"},
		{"quic", "download", "0.500", "0.500000"}, {"quic", "download", "0.750", "1.000000"},
	}, rowsOf(t, rep, "mobile-ratio-cdf"))
	scatter, ok := rep.Figure("mobile-upload-scatter")
	require.True(t, ok)
	assert.Equal(t, []analysis.Series{{Name: "quic", X: []float64{2.5, 6}, Y: []float64{1, 3}}}, scatter.Series)

	// Without mobile records there is no mobile table at all.
	rep, err = analysis.Analyze(analysis.Files("../testdata/v1.0/run.json"))
	require.NoError(t, err)
	for _, name := range []string{"mobile-status", "mobile-causes", "handover-duration-cdf", "max-delay-cdf", "mobile-ratio-cdf"} {
		_, ok := rep.Table(name)
		assert.False(t, ok, name)
	}
}

func intStr(v int64) string {
	b, _ := json.Marshal(v)
	return string(b)
}
