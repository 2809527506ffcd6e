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
	l := labtest.Start(t, lab.Options{Domains: 60, WorldSeed: 3, Impair: map[string]lab.ImpairChange{"wwan0": {NAT64: &yes}}})
	if !l.InClient(t) {
		return
	}
	var truth world.Truth
	l.Truth(t, &truth)
	info := l.Config()
	pfx := lab.NAT64Of("wwan0").Prefix.String()
	args := labSurveyArgs(info, func(p lab.PathPlan) []netip.Addr {
		if p.Name == "wwan0" { // IPv6-only: its resolver is the DNS64 on the IPv6 address
			return []netip.Addr{p.Resolv6}
		}
		return []netip.Addr{p.Resolv6, p.Resolv4}
	})
	run := func(extra ...string) (map[string]any, survey.Summary) {
		return runSurveyDoc(t, append(slices.Clone(args), extra...)...)
	}

	cfg, sum := run()
	assert.Equal(t, map[string]any{"wwan0": pfx}, cfg["nat64_prefixes"], "header")
	for i, w := range truth.Summary.Cells {
		g := sum.Cells[i]
		cell := w.ProbePath + "/" + w.ResolvePath
		assert.Equal(t, [4]int{w.Targets, w.Unresponsive, w.ViaNAT64, w.ViaNAT64Responsive},
			[4]int{g.Targets, g.Unresponsive, g.ViaNAT64, g.ViaNAT64Responsive}, "%s: targets, unresponsive, via_nat64, via_nat64_responsive", cell)
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
	l := labtest.Start(t, lab.Options{Domains: 60, WorldSeed: 3, Impair: map[string]lab.ImpairChange{"wwan0": {NAT64: &on, NAT64No7050: &on}}})
	if !l.InClient(t) {
		return
	}
	var truth world.Truth
	l.Truth(t, &truth)
	info := l.Config()
	pfx := lab.NAT64Of("wwan0").Prefix.String()
	args := labSurveyArgs(info, func(p lab.PathPlan) []netip.Addr {
		if p.Name == "wwan0" {
			return []netip.Addr{p.Resolv6}
		}
		return []netip.Addr{p.Resolv6, p.Resolv4}
	})
	matches := func(sum survey.Summary) bool {
		ok := truth.Summary.Overlap == sum.Overlap && len(sum.Cells) == len(truth.Summary.Cells)
		for i, w := range truth.Summary.Cells {
			if ok {
				g := sum.Cells[i]
				ok = [4]int{w.Targets, w.Unresponsive, w.ViaNAT64, w.ViaNAT64Responsive} == [4]int{g.Targets, g.Unresponsive, g.ViaNAT64, g.ViaNAT64Responsive}
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
		g := sum.Cells[i]
		cell := w.ProbePath + "/" + w.ResolvePath
		assert.Equal(t, [4]int{w.Targets, w.Unresponsive, w.ViaNAT64, w.ViaNAT64Responsive},
			[4]int{g.Targets, g.Unresponsive, g.ViaNAT64, g.ViaNAT64Responsive}, "%s: targets, unresponsive, via_nat64, via_nat64_responsive", cell)
	}
	assert.Equal(t, truth.Summary.Overlap, sum.Overlap, "overlap with synthesized AAAA mapped to their IPv4")
}
