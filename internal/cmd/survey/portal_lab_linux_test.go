//go:build linux && !race

package survey

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/labtest"
	"github.com/mptester/mptester/lab/world"
	"github.com/mptester/mptester/report/analysis"
	"github.com/mptester/mptester/survey"
)

// TestLabSurveyCommandPortal: with a captive portal on wlan0 the survey
// stops wlan0's part at start (the header names it, with what was
// measured) and surveys wwan0 as the truth says; with the portal lifted
// the same survey stops nothing and has all four cells.
func TestLabSurveyCommandPortal(t *testing.T) {
	on := true
	l := labtest.Start(t, lab.Options{Domains: 30, WorldSeed: 5, Impair: map[string]lab.ImpairChange{"wlan0": {Portal: &on}}})
	if !l.InClient(t) {
		return
	}
	var truth world.Truth
	l.Truth(t, &truth)
	info := l.Config()
	args := labSurveyArgs(info, func(p lab.PathPlan) []netip.Addr { return []netip.Addr{p.Resolv4, p.Resolv6} })
	var out string
	run := func() (cfg map[string]any, sum survey.Summary) {
		cfg, sum, out = runSurveyOut(t, args...)
		return cfg, sum
	}
	// findings are the report's Findings rows about stopped paths.
	findings := func() []string {
		f := filepath.Join(t.TempDir(), "survey.jsonl")
		require.NoError(t, os.WriteFile(f, []byte(out), 0o644))
		rep, err := analysis.Analyze(analysis.Files(f))
		require.NoError(t, err)
		tb, ok := rep.Table("findings")
		require.True(t, ok)
		var rows []string
		for r := range tb.All() {
			if r[2] == "stopped-paths" {
				rows = append(rows, r[0]+": "+r[1])
			}
		}
		return rows
	}
	truthCell := func(probePath, resolvePath string) survey.Cell {
		for _, c := range truth.Summary.Cells {
			if c.ProbePath == probePath && c.ResolvePath == resolvePath {
				return c
			}
		}
		t.Fatalf("no truth cell %s/%s", probePath, resolvePath)
		return survey.Cell{}
	}

	cfg, sum := run()
	stopped, _ := cfg["stopped_paths"].(map[string]any)
	why, _ := stopped["wlan0"].(string)
	assert.Len(t, stopped, 1, "stopped paths %v", cfg["stopped_paths"])
	assert.True(t, strings.HasPrefix(why, "portal: ") && strings.Contains(why, lab.PortalAddr4.String()) && strings.Contains(why, "http://"+lab.PortalName+lab.PortalLoginPath),
		"wlan0's stop %q: want portal, its address and login page", why)
	if f := findings(); assert.Len(t, f, 1, "report findings about stopped paths") {
		assert.True(t, strings.HasPrefix(f[0], "path wlan0: survey stopped at start in 1 of 1 runs (portal: ") && strings.Contains(f[0], lab.PortalAddr4.String()),
			"report finding %q: want wlan0 stopped by the portal at %s", f[0], lab.PortalAddr4)
	}
	require.Len(t, sum.Cells, 1, "only wwan0/wwan0 is surveyed")
	w, g := truthCell("wwan0", "wwan0"), sum.Cells[0]
	assert.Equal(t, []any{"wwan0", "wwan0", w.Targets, w.Unresponsive}, []any{g.ProbePath, g.ResolvePath, g.Targets, g.Unresponsive})

	l.Set(t, "wlan0", "portal=off")
	cfg, sum = run()
	assert.NotContains(t, cfg, "stopped_paths", "clean lab")
	assert.Empty(t, findings(), "clean lab: no report finding about stopped paths")
	assert.Len(t, sum.Cells, 4)
}
