package agent

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mptester/mptester/agent"
	"github.com/mptester/mptester/agent/caps"
	"github.com/mptester/mptester/internal/cmd/survey"
	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/patterns"
	"github.com/mptester/mptester/patterns/transport"
)

// TestBudgetDefaultsMatchRun: the agent's budget estimate assumes the run
// command's own defaults (the agent does not import patterns): they must
// stay equal.
func TestBudgetDefaultsMatchRun(t *testing.T) {
	assert.Equal(t, strings.Join(patterns.Names(), ","), agent.DefaultPatterns)
	assert.Len(t, transport.Names(), agent.DefaultTransports)
	assert.Len(t, patterns.HandoverTransports(), agent.HandoverTransports)
	assert.Equal(t, int64(patterns.DefaultBulkSize), int64(agent.DefaultBulkSize))
	assert.Equal(t, patterns.DefaultIperf, agent.DefaultIperf)
	assert.Equal(t, patterns.DefaultPingCount, agent.DefaultPingCount)
	assert.Equal(t, patterns.DefaultChunk, agent.DefaultChunk)
	assert.Equal(t, patterns.DefaultInterval, agent.DefaultInterval)
	assert.Equal(t, patterns.DefaultMobileDuration, agent.DefaultMobileDuration)
	// The survey's defaults the time caps assume.
	cmd := newSurveyCmdDefaults(t)
	assert.Equal(t, caps.SurveyDefaultCount, cmd["count"])
	assert.Equal(t, caps.SurveyDefaultDNSRetries, cmd["dns-retries"])
}

// newSurveyCmdDefaults reads the survey command's integer flag defaults.
func newSurveyCmdDefaults(t *testing.T) map[string]int {
	io, _, _ := cmdutil.Test()
	cmd := survey.NewCmdSurvey(&cmdutil.Factory{IO: io}, nil)
	out := map[string]int{}
	for _, name := range []string{"count", "dns-retries"} {
		v, err := cmd.Flags().GetInt(name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = v
	}
	return out
}
