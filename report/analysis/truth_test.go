package analysis_test

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/lab/world"
	"github.com/mptester/mptester/report"
	"github.com/mptester/mptester/report/analysis"
	"github.com/mptester/mptester/survey"
)

// jitter is planted around each target's true RTT: its median is 0 while
// its mean is not, so a report pooling means or single samples fails.
var jitter = []float64{-0.3, -0.2, -0.1, 0, 0, 0, 0.1, 0.2, 5, 9}

// surveyOf writes, as JSON Lines, the records a survey of w measuring
// exactly the truth would write: one resolution record per domain and path,
// one probe record per (probe path, address) listing the cells it belongs
// to (cross-path private addresses skipped, as the truth's policy says).
// It also returns each cell's true per-target RTTs.
func surveyOf(t *testing.T, w *world.World, tr *world.Truth) ([]byte, map[string][]float64) {
	t.Helper()
	var buf bytes.Buffer
	var paths []report.Path
	for i, p := range tr.Paths {
		paths = append(paths, report.Path{Name: p, Index: i + 2, Kind: "wifi", Up: true})
	}
	h := report.Header{SchemaVersion: report.SchemaVersion, RunID: "11111111-2222-4333-8444-555555555555", ProbeID: "m-test",
		Command: "survey", Tool: report.Tool{Name: "mptester", Version: "test"}, StartedAt: time.Unix(1e9, 0), Paths: paths}
	s, err := report.NewStream(&buf, h)
	require.NoError(t, err)
	sets := map[string]map[netip.Addr]bool{}
	var all []netip.Addr
	for _, p := range tr.Paths {
		sets[p] = map[netip.Addr]bool{}
		for _, d := range tr.Domains {
			r := d.Paths[p]
			rec := survey.ResolutionRecord{Type: "resolution", Domain: d.Name, Rank: d.Rank, Path: p,
				Status: r.Status, Answers: slices.Clone(r.Addrs), Valid: true}
			if pfx, ok := tr.NAT64[p]; ok && r.Status == world.StatusNoError && !slices.ContainsFunc(r.Addrs, netip.Addr.Is6) {
				// A DNS64 answers AAAA synthesized from the A records
				// (RFC 6052 /96: the IPv4 in the last 4 bytes).
				rec.AnswersMapped = slices.Clone(r.Addrs)
				for _, a := range r.Addrs {
					b := pfx.Addr().As16()
					v := a.As4()
					copy(b[12:], v[:])
					rec.Answers = append(rec.Answers, netip.AddrFrom16(b))
					rec.AnswersMapped = append(rec.AnswersMapped, a)
				}
			}
			require.NoError(t, s.Write(rec))
			if r.Status != world.StatusNoError {
				continue
			}
			for _, a := range r.Addrs {
				if !sets[p][a] {
					sets[p][a] = true
					if !slices.Contains(all, a) {
						all = append(all, a)
					}
				}
			}
		}
	}
	truth := map[string][]float64{}
	for _, probe := range tr.Paths {
		for _, a := range all {
			var cells []string
			for _, res := range tr.Paths {
				if sets[res][a] && !(w.Targets[a].Private && probe != res && !tr.AllowCrossPrivate) {
					cells = append(cells, res)
				}
			}
			if len(cells) == 0 {
				continue
			}
			rec := survey.ProbeRecord{Type: "probe", ProbePath: probe, ResolvePath: cells[0], ResolvePaths: cells, Address: a,
				Method: "tcp-syn", Sent: len(jitter), RTTsMs: []float64{}, Valid: true}
			key := func(c string) string { return analysis.CellName(probe, c) }
			if pfx, ok := tr.NAT64[probe]; ok && a.Is4() {
				rec.Route, rec.NAT64Prefix = survey.RouteViaNAT64, pfx
				key = func(c string) string { return analysis.CellName(probe, c) + " " + survey.RouteViaNAT64 }
			}
			if rtt, ok := tr.ExpectedRTTms[probe][a]; ok {
				rec.Responsive, rec.Received = true, len(jitter)
				for _, j := range jitter {
					rec.RTTsMs = append(rec.RTTsMs, rtt+j)
				}
				rec.Median = rtt
				for _, c := range cells {
					truth[key(c)] = append(truth[key(c)], rtt)
				}
			}
			require.NoError(t, s.Write(rec))
		}
	}
	require.NoError(t, s.Close(report.StatusOK, ""))
	return buf.Bytes(), truth
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err, s)
	return v
}

// TestSurveyTablesEqualLabTruth: the unresponsive table, the per-cell RTT
// quantiles, the cell comparisons, resolution and overlap equal what lab/world computes
// independently from its ground truth (counts exact, RTTs within 0.001 ms:
// the tables print three decimals; percentages within 0.005). Given twice
// (a second run of the same records as a gzip'd document), every count doubles;
// the same run given twice is refused and the quantiles are
// those of the pooled sample.
func TestSurveyTablesEqualLabTruth(t *testing.T) {
	w, err := world.Generate(world.Options{Seed: 14, Domains: 600})
	require.NoError(t, err)
	tr, err := w.Truth(world.ExpectOptions{})
	require.NoError(t, err)
	stream, medians := surveyOf(t, w, tr)
	dir := t.TempDir()
	plain := filepath.Join(dir, "survey.jsonl")
	require.NoError(t, os.WriteFile(plain, stream, 0o644))
	gz := filepath.Join(dir, "survey.json.gz")
	second := bytes.ReplaceAll(stream, []byte("11111111-2222-4333-8444-555555555555"), []byte("11111111-2222-4333-8444-666666666666"))
	require.NoError(t, os.WriteFile(gz, gzipped(t, toDocument(t, second)), 0o644))
	_, err = analysis.Analyze(analysis.Files(plain, plain))
	require.ErrorIs(t, err, analysis.ErrInput)
	assert.ErrorContains(t, err, "survey.jsonl: run 11111111-2222-4333-8444-555555555555 is already read from")

	for _, tc := range []struct {
		files []string
		times int
	}{{[]string{plain}, 1}, {[]string{plain, gz}, 2}} {
		rep, err := analysis.Analyze(analysis.Files(tc.files...))
		require.NoError(t, err)
		un, ok := rep.Table("unresponsive")
		require.True(t, ok)
		rtt, _ := rep.Table("rtt")
		require.Len(t, un.Rows, len(tr.Summary.Cells))
		for i, c := range tr.Summary.Cells {
			name := analysis.CellName(c.ProbePath, c.ResolvePath)
			row := un.Rows[i]
			assert.Equal(t, []string{name, fmt.Sprint(tc.times * c.Targets), fmt.Sprint(tc.times * c.Responsive),
				fmt.Sprint(tc.times * c.Unresponsive)}, row[:4], "cell %s", name)
			assert.InDelta(t, c.UnresponsivePct, num(t, row[4]), 0.005, name)
			q := rtt.Rows[i]
			require.Equal(t, name, q[0])
			assert.Equal(t, fmt.Sprint(tc.times*c.Responsive), q[1])
			// Pooled runs are one sample: the quantiles of the truth's
			// medians given tc.times times (equal to the truth's own once).
			var pooled []float64
			for range tc.times {
				pooled = append(pooled, medians[name]...)
			}
			st := world.Stats(pooled)
			if tc.times == 1 {
				require.Equal(t, c.RTTms, st, name)
			}
			for j, want := range []float64{st.Min, st.P10, st.P25, st.P50, st.P75, st.P90, st.Max, st.Mean} {
				assert.InDelta(t, want, num(t, q[2+j]), 0.001, "%s %s", name, rtt.Columns[2+j])
			}
		}
		ov, _ := rep.Table("overlap")
		require.Len(t, ov.Rows, tc.times)
		o := tr.Summary.Overlap
		for _, row := range ov.Rows {
			assert.Equal(t, []string{o.PathA, o.PathB, fmt.Sprint(o.IPsPathA), fmt.Sprint(o.IPsPathB), fmt.Sprint(o.IPsCommon)}, row[1:6])
			assert.InDelta(t, o.OverlapPct, num(t, row[6]), 0.005)
			assert.InDelta(t, o.DomainsDifferPct, num(t, row[8]), 0.005)
			assert.InDelta(t, o.DomainsUnresolvedSomewherePct, num(t, row[9]), 0.005)
		}
		res, _ := rep.Table("resolution")
		require.Len(t, res.Rows, tc.times*len(tr.Summary.Resolution))
		for i, pr := range tr.Summary.Resolution {
			assert.Equal(t, []string{pr.Path, fmt.Sprint(pr.Domains), fmt.Sprint(pr.Resolved), fmt.Sprint(pr.Failed)}, res.Rows[i][1:5])
		}
		cmp, _ := rep.Table("comparisons")
		require.Len(t, cmp.Rows, len(tr.Summary.Comparisons))
		for i, c := range tr.Summary.Comparisons {
			row := cmp.Rows[i]
			assert.Equal(t, []string{c.A, c.B, fmt.Sprint(tc.times * c.Domains)}, row[:3])
			assert.InDelta(t, c.MeanDiffMs, num(t, row[3]), 0.001, "%s vs %s", c.A, c.B)
			assert.InDelta(t, c.ASlowerPct, num(t, row[4]), 0.005, "%s vs %s", c.A, c.B)
		}
		cdf, _ := rep.Table("rtt-cdf")
		assert.Positive(t, cdf.Len())
	}
	// The truth is not degenerate: the test could fail.
	require.Greater(t, tr.Summary.Cells[1].Unresponsive, 0)
	require.NotEqual(t, tr.Summary.Cells[0].RTTms.P10, tr.Summary.Cells[0].RTTms.P90)
	require.Positive(t, tr.Summary.Comparisons[0].ASlowerPct+tr.Summary.Comparisons[1].ASlowerPct)
}

// TestSurveyTablesViaNAT64: a survey whose second path probed its IPv4
// targets through a NAT64 (route via-nat64): the unresponsive table gets
// via_nat64 and via_nat64_responsive columns equal to the truth's cells,
// the rtt table a route column with a direct and a via-nat64 row per cell
// of that path, each equal to the truth's rtt_ms and rtt_via_nat64_ms
// (the translator's RTTs kept apart); a survey without NAT64 has neither
// (TestSurveyTablesEqualLabTruth reads its columns as before).
func TestSurveyTablesViaNAT64(t *testing.T) {
	w, err := world.Generate(world.Options{Seed: 14, Domains: 300})
	require.NoError(t, err)
	nat := w.Paths[1]
	tr, err := w.Truth(world.ExpectOptions{NAT64: map[string]netip.Prefix{nat: netip.MustParsePrefix("fd00:64::/96")}})
	require.NoError(t, err)
	stream, medians := surveyOf(t, w, tr)
	file := filepath.Join(t.TempDir(), "survey.jsonl")
	require.NoError(t, os.WriteFile(file, stream, 0o644))
	rep, err := analysis.Analyze(analysis.Files(file))
	require.NoError(t, err)
	un, _ := rep.Table("unresponsive")
	rtt, _ := rep.Table("rtt")
	require.Equal(t, []string{"via_nat64", "via_nat64_responsive"}, un.Columns[len(un.Columns)-2:])
	require.Equal(t, "route", rtt.Columns[len(rtt.Columns)-1])
	require.Len(t, un.Rows, len(tr.Summary.Cells))
	i := 0
	for k, c := range tr.Summary.Cells {
		name := analysis.CellName(c.ProbePath, c.ResolvePath)
		row := un.Rows[k]
		assert.Equal(t, []string{name, fmt.Sprint(c.Targets), fmt.Sprint(c.Responsive), fmt.Sprint(c.Unresponsive)}, row[:4])
		assert.Equal(t, []string{fmt.Sprint(c.ViaNAT64), fmt.Sprint(c.ViaNAT64Responsive)}, row[len(row)-2:], name)
		want := []struct {
			route string
			st    survey.RTTStats
			key   string
		}{{"direct", c.RTTms, name}}
		if c.ProbePath == nat {
			require.Positive(t, c.ViaNAT64, name)
			require.NotNil(t, c.RTTViaNAT64ms, name)
			want = append(want, struct {
				route string
				st    survey.RTTStats
				key   string
			}{survey.RouteViaNAT64, *c.RTTViaNAT64ms, name + " " + survey.RouteViaNAT64})
		} else {
			assert.Zero(t, c.ViaNAT64, name)
		}
		for _, wr := range want {
			q := rtt.Rows[i]
			i++
			require.Equal(t, []string{name, wr.route}, []string{q[0], q[len(q)-1]})
			require.Equal(t, wr.st, world.Stats(medians[wr.key]), "%s %s: the test's records against the truth", name, wr.route)
			for j, v := range []float64{wr.st.Min, wr.st.P10, wr.st.P25, wr.st.P50, wr.st.P75, wr.st.P90, wr.st.Max, wr.st.Mean} {
				assert.InDelta(t, v, num(t, q[2+j]), 0.001, "%s %s %s", name, wr.route, rtt.Columns[2+j])
			}
		}
	}
	assert.Len(t, rtt.Rows, i)

	// The overlap counts each synthesized AAAA as its IPv4, as the truth.
	ov, _ := rep.Table("overlap")
	require.Len(t, ov.Rows, 1)
	o := tr.Summary.Overlap
	assert.Equal(t, []string{o.PathA, o.PathB, fmt.Sprint(o.IPsPathA), fmt.Sprint(o.IPsPathB), fmt.Sprint(o.IPsCommon)}, ov.Rows[0][1:6])
	assert.InDelta(t, o.OverlapPct, num(t, ov.Rows[0][6]), 0.005)
	assert.InDelta(t, o.DomainsDifferPct, num(t, ov.Rows[0][8]), 0.005)

	// The comparisons keep a domain's direct and translated RTTs apart,
	// as the truth does: direct pairs, then the pairs of cells both with
	// targets via the NAT64 over their translated RTTs.
	cmpT, _ := rep.Table("comparisons")
	require.Equal(t, "route", cmpT.Columns[len(cmpT.Columns)-1])
	require.Len(t, cmpT.Rows, len(tr.Summary.Comparisons))
	viaPairs := 0
	for i, c := range tr.Summary.Comparisons {
		row := cmpT.Rows[i]
		route := cmp.Or(c.Route, "direct")
		if c.Route != "" {
			viaPairs++
		}
		assert.Equal(t, []string{c.A, c.B, fmt.Sprint(c.Domains), route}, []string{row[0], row[1], row[2], row[len(row)-1]})
		assert.InDelta(t, c.MeanDiffMs, num(t, row[3]), 0.001, "%s vs %s %s", c.A, c.B, route)
		assert.InDelta(t, c.ASlowerPct, num(t, row[4]), 0.005, "%s vs %s %s", c.A, c.B, route)
	}
	require.Equal(t, 1, viaPairs, "the NAT64 path's two cells compared over translated RTTs")

	// The resolution table counts the domains the DNS64 synthesized for.
	res, _ := rep.Table("resolution")
	require.Equal(t, "synthesized", res.Columns[len(res.Columns)-1])
	require.Len(t, res.Rows, len(tr.Summary.Resolution))
	for i, pr := range tr.Summary.Resolution {
		if pr.Path == nat {
			require.Positive(t, pr.Synthesized)
		}
		assert.Equal(t, []string{pr.Path, fmt.Sprint(pr.Synthesized)}, []string{res.Rows[i][1], res.Rows[i][len(res.Rows[i])-1]})
	}

	// The path table and the findings: the path behind the NAT64 leads,
	// each of its cells says how many targets the translator reached.
	nt, ok := rep.Table("nat64")
	require.True(t, ok)
	via, resp := 0, 0
	for _, c := range tr.Summary.Cells {
		if c.ProbePath == nat {
			via, resp = via+c.ViaNAT64, resp+c.ViaNAT64Responsive
		}
	}
	require.Len(t, nt.Rows, 1)
	// A record is one target however many cells list it: at most the
	// cells' sum, and all of the path's IPv4 records.
	v4, v4resp := 0, 0
	for a, tg := range w.Targets {
		if a.Is4() && slices.ContainsFunc(tr.Domains, func(d world.DomainTruth) bool {
			return slices.ContainsFunc(tr.Paths, func(p string) bool {
				return d.Paths[p].Status == world.StatusNoError && slices.Contains(d.Paths[p].Addrs, a) &&
					(p == nat || !tg.Private) // cross-path private: skipped
			})
		}) {
			v4++
			if _, ok := tr.ExpectedRTTms[nat][a]; ok {
				v4resp++
			}
		}
	}
	assert.Equal(t, []string{nat, "fd00:64::/96", fmt.Sprint(v4), fmt.Sprint(v4resp)}, nt.Rows[0][:4])
	assert.LessOrEqual(t, v4, via)
	f, _ := rep.Table("findings")
	require.NotEmpty(t, f.Rows)
	assert.Equal(t, "path "+nat, f.Rows[0][0])
	assert.Contains(t, f.Rows[0][1], "IPv6-only behind NAT64 fd00:64::/96: "+fmt.Sprint(v4)+" IPv4 targets probed through the translator, "+fmt.Sprint(v4resp)+" answered")
	var synth int
	for _, pr := range tr.Summary.Resolution {
		if pr.Path == nat {
			synth = pr.Synthesized
			assert.Equal(t, []string{"path " + nat, fmt.Sprintf("%d of %d resolved domains answered by a DNS64 (synthesized AAAA, counted as the IPv4 they embed)", pr.Synthesized, pr.Resolved), "resolution"}, f.Rows[1])
		}
	}
	require.Positive(t, synth)
	for _, row := range f.Rows[2:] {
		for _, c := range tr.Summary.Cells {
			if row[0] != "cell "+analysis.CellName(c.ProbePath, c.ResolvePath) {
				continue
			}
			if c.ProbePath == nat {
				assert.Contains(t, row[1], fmt.Sprintf("; %.2f%% of its targets reached via NAT64 (median RTT %s ms)",
					100*float64(c.ViaNAT64Responsive)/float64(c.Targets), fmt.Sprintf("%.3f", c.RTTViaNAT64ms.P50)), row[0])
			} else {
				assert.NotContains(t, row[1], "NAT64", row[0])
			}
			assert.Contains(t, row[1], fmt.Sprintf("median RTT %.3f ms over %d responsive targets", c.RTTms.P50, c.Responsive-c.ViaNAT64Responsive), row[0])
		}
	}
}

// toDocument turns a stream into the run document of the same run.
func toDocument(t *testing.T, stream []byte) []byte {
	t.Helper()
	lines := bytes.Split(bytes.TrimSpace(stream), []byte("\n"))
	var d report.Document
	require.NoError(t, json.Unmarshal(lines[0], &d.Header))
	for _, l := range lines[1 : len(lines)-1] {
		d.Records = append(d.Records, json.RawMessage(l))
	}
	d.Status = report.StatusOK
	d.FinishedAt = d.StartedAt
	b, err := json.MarshalIndent(d, "", " ")
	require.NoError(t, err)
	return b
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := io.Copy(zw, bytes.NewReader(b))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}
