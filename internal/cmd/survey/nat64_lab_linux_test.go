//go:build linux && !race

package survey

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/labtest"
	"github.com/mptester/mptester/lab/world"
	"github.com/mptester/mptester/survey"
)

// TestLabSurveyCommandNAT64 runs `mptester survey` in the lab's nat64
// world (wwan0 IPv6-only behind tayga and unbound's DNS64): the command
// discovers wwan0's prefix (RFC 7050) and records it in the header and
// the summary; its cells count the IPv4 targets through the translator as
// the truth does. With --no-nat64 the same targets are skipped as
// no-source-address (never unresponsive), one skip per truth target.
func TestLabSurveyCommandNAT64(t *testing.T) {
	yes := true
	truth, pfx, args, ok := startNAT64Survey(t, lab.ImpairChange{NAT64: &yes})
	if !ok {
		return
	}
	run := func(extra ...string) (map[string]any, survey.Summary) {
		return runSurveyDoc(t, append(slices.Clone(args), extra...)...)
	}

	cfg, sum := run()
	assert.Equal(t, map[string]any{"wwan0": pfx}, cfg["nat64_prefixes"], "header")
	for i, w := range truth.Summary.Cells {
		assert.Equal(t, nat64Counts(w), nat64Counts(sum.Cells[i]), "%s/%s: targets, unresponsive, via_nat64, via_nat64_responsive", w.ProbePath, w.ResolvePath)
	}
	assert.Equal(t, truth.Summary.Overlap, sum.Overlap, "overlap with synthesized AAAA mapped to their IPv4")
	for _, s := range sum.Skipped {
		assert.NotEqual(t, survey.SkipNoSource, s.Reason)
	}

	cfg, sum = run("--no-nat64")
	assert.NotContains(t, cfg, "nat64_prefixes")
	skipped := map[string]int{}
	for _, s := range sum.Skipped {
		if s.Reason == survey.SkipNoSource {
			skipped[s.ProbePath+"/"+s.ResolvePath] = s.Count
		}
	}
	want := map[string]int{}
	for _, c := range truth.Summary.Cells {
		if c.ViaNAT64 > 0 {
			want[c.ProbePath+"/"+c.ResolvePath] = c.ViaNAT64
		}
	}
	require.NotEmpty(t, want)
	assert.Equal(t, want, skipped, "without a prefix every IPv4 target of wwan0 is no-source-address")
	for _, c := range sum.Cells {
		assert.Zero(t, c.ViaNAT64, fmt.Sprint(c.ProbePath, "/", c.ResolvePath))
	}
}

// TestLabSurveyCommandNAT64Given: wwan0's DNS64 answers ipv4only.arpa
// NXDOMAIN (nat64=no-rfc7050), so RFC 7050 discovery finds nothing and
// the survey counts synthesized AAAA as IPv6 servers (the overlap and
// cells differ from the truth); with --nat64-prefix wwan0=PREFIX (as a
// network's RFC 8781 PREF64 would tell) the header records the prefix as
// given and every cell and the overlap equal the truth.
func TestLabSurveyCommandNAT64Given(t *testing.T) {
	on := true
	truth, pfx, args, ok := startNAT64Survey(t, lab.ImpairChange{NAT64: &on, NAT64No7050: &on})
	if !ok {
		return
	}
	matches := func(sum survey.Summary) bool {
		ok := truth.Summary.Overlap == sum.Overlap && len(sum.Cells) == len(truth.Summary.Cells)
		for i, w := range truth.Summary.Cells {
			if ok {
				ok = nat64Counts(w) == nat64Counts(sum.Cells[i])
			}
		}
		return ok
	}

	cfg, sum := runSurveyDoc(t, args...)
	assert.Equal(t, map[string]any{}, cfg["nat64_prefixes"], "RFC 7050 discovery finds nothing")
	assert.False(t, matches(sum), "without the prefix the synthesized AAAA count as IPv6: the figures cannot equal the truth")

	cfg, sum = runSurveyDoc(t, append(slices.Clone(args), "--nat64-prefix", "wwan0="+pfx)...)
	assert.Equal(t, map[string]any{"wwan0": pfx}, cfg["nat64_prefixes"], "header")
	assert.Equal(t, map[string]any{"wwan0": pfx}, cfg["nat64_prefixes_given"], "header")
	for i, w := range truth.Summary.Cells {
		assert.Equal(t, nat64Counts(w), nat64Counts(sum.Cells[i]), "%s/%s: targets, unresponsive, via_nat64, via_nat64_responsive", w.ProbePath, w.ResolvePath)
	}
	assert.Equal(t, truth.Summary.Overlap, sum.Overlap, "overlap with synthesized AAAA mapped to their IPv4")
}

// startNAT64Survey brings the lab up with wwan0 changed by impair (its
// NAT64 world, 60 domains) and, in the lab's client, returns the truth,
// wwan0's NAT64 prefix and the survey's arguments: wwan0 is IPv6-only, so
// it asks its DNS64 on the IPv6 address. ok is false outside the client.
func startNAT64Survey(t *testing.T, impair lab.ImpairChange) (truth world.Truth, pfx string, args []string, ok bool) {
	t.Helper()
	l := labtest.Start(t, lab.Options{Domains: 60, WorldSeed: 3, Impair: map[string]lab.ImpairChange{"wwan0": impair}})
	if !l.InClient(t) {
		return truth, "", nil, false
	}
	l.Truth(t, &truth)
	args = labSurveyArgs(l.Config(), func(p lab.PathPlan) []netip.Addr {
		if p.Name == "wwan0" {
			return []netip.Addr{p.Resolv6}
		}
		return []netip.Addr{p.Resolv6, p.Resolv4}
	})
	return truth, lab.NAT64Of("wwan0").Prefix.String(), args, true
}

// nat64Counts is what a cell's NAT64 figures are compared on.
func nat64Counts(c survey.Cell) [4]int {
	return [4]int{c.Targets, c.Unresponsive, c.ViaNAT64, c.ViaNAT64Responsive}
}
