//go:build linux && !race

package survey

import (
	"bufio"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/survey"
)

// labSurveyArgs are the lab surveys' flags: both paths, the lab's list
// and public prefixes, each path's resolvers as dns chooses them.
func labSurveyArgs(info lab.Info, dns func(lab.PathPlan) []netip.Addr) []string {
	args := []string{"--list", info.Files.Tranco, "--paths", "wlan0,wwan0", "--method", "tcp-syn", "--count", "2",
		"--rate", "1500", "--spacing", "5ms", "--timeout", "1s", "--dns-timeout", "800ms"}
	for _, p := range info.Paths {
		for _, a := range dns(p) {
			args = append(args, "--dns", p.Name+"="+a.String())
		}
	}
	for _, p := range info.PublicPrefixes {
		args = append(args, "--public-prefix", p.String())
	}
	return args
}

// runSurveyDoc runs the command and returns its header's config and its
// summary (which must have cells).
func runSurveyDoc(t *testing.T, args ...string) (map[string]any, survey.Summary) {
	t.Helper()
	cfg, sum, _ := runSurveyOut(t, args...)
	return cfg, sum
}

// runSurveyOut is runSurveyDoc that also returns the command's output.
func runSurveyOut(t *testing.T, args ...string) (map[string]any, survey.Summary, string) {
	t.Helper()
	out, errOut, err := runCLI(t, args...)
	require.NoError(t, err, errOut)
	var hdr struct {
		Config map[string]any `json:"config"`
	}
	var sum survey.Summary
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var typ struct {
			Type string `json:"type"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &typ))
		switch typ.Type {
		case "header":
			require.NoError(t, json.Unmarshal(sc.Bytes(), &hdr))
		case "summary":
			require.NoError(t, json.Unmarshal(sc.Bytes(), &sum))
		}
	}
	require.NotEmpty(t, sum.Cells, out)
	return hdr.Config, sum, out
}
