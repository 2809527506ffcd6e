//go:build linux && !race

package survey

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/nstest"
	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/labtest"
	"github.com/mptester/mptester/lab/world"
	"github.com/mptester/mptester/survey"
)

// TestLabSurveyMobileV6Only: 004 Table I (the WW/WL/LW/LL cells) and the
// overlap of a survey in the mobile-v6only world (wwan0 IPv6-only behind
// NAT64/DNS64, wlan0 whose IPv6 is black-holed towards a share of hosts)
// equal the world's truth.
func TestLabSurveyMobileV6Only(t *testing.T) {
	for _, bin := range []string{"tayga", "unbound"} {
		if _, err := exec.LookPath(bin); err != nil {
			nstest.SkipUnless(t, "the mobile-v6only world needs "+bin)
		}
	}
	o := lab.Options{Domains: 60, WorldSeed: 3}
	require.True(t, lab.ApplyWorldPreset("mobile-v6only", &o))
	l := labtest.Start(t, o)
	if !l.InClient(t) {
		return
	}
	var truth world.Truth
	l.Truth(t, &truth)
	info := l.Config()
	w, err := world.Load(info.Files.World)
	require.NoError(t, err)
	blocked := map[bool]int{}
	for a, tg := range w.Targets {
		if !tg.Private && !tg.Reachable("wlan0") && tg.Reachable("wwan0") {
			blocked[a.Is6()]++
		}
	}
	assert.Greater(t, blocked[true], blocked[false], "the world black-holes more IPv6 than IPv4 hosts on wlan0: %v", blocked)

	args := []string{"--list", info.Files.Tranco, "--paths", "wlan0,wwan0", "--method", "tcp-syn", "--count", "2",
		"--rate", "1500", "--spacing", "5ms", "--timeout", "1s", "--dns-timeout", "800ms",
		"--dns", "wlan0=" + info.Resolvers["wlan0"][0], "--dns", "wwan0=" + info.Resolvers["wwan0"][0]}
	for _, p := range info.PublicPrefixes {
		args = append(args, "--public-prefix", p.String())
	}
	out, errOut, err := runCLI(t, args...)
	require.NoError(t, err, errOut)
	var sum survey.Summary
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), `{"type":"summary"`) {
			require.NoError(t, json.Unmarshal(sc.Bytes(), &sum))
		}
	}
	require.Len(t, sum.Cells, len(truth.Summary.Cells), out)
	for i, tc := range truth.Summary.Cells {
		g := sum.Cells[i]
		cell := tc.ProbePath + "/" + tc.ResolvePath
		assert.Equal(t, [4]int{tc.Targets, tc.Unresponsive, tc.ViaNAT64, tc.ViaNAT64Responsive},
			[4]int{g.Targets, g.Unresponsive, g.ViaNAT64, g.ViaNAT64Responsive}, "%s: targets, unresponsive, via_nat64, via_nat64_responsive", cell)
		t.Logf("%s: %d targets, %d unresponsive (%.1f%%), %d via NAT64, median RTT %.1f ms (truth %.1f)",
			cell, g.Targets, g.Unresponsive, g.UnresponsivePct, g.ViaNAT64, g.RTTms.P50, tc.RTTms.P50)
	}
	assert.Equal(t, truth.Summary.Overlap, sum.Overlap, "overlap")
	t.Logf("overlap %+v", sum.Overlap)
}
