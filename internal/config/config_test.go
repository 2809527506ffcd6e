package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseTyped(t *testing.T) {
	cfg, err := Parse([]byte("survey:\n  timeout: 2s\n  spacing: 0s\n  top: 10\nrun:\n  transports: [tcp, quic]\n"))
	require.NoError(t, err)
	assert.Equal(t, 2*time.Second, cfg.Survey.Timeout.D())
	assert.True(t, cfg.Has("survey.spacing"), "a key set to its zero value is set")
	assert.False(t, cfg.Has("survey.rate"))
	assert.Equal(t, "config line 4: survey.top", cfg.Where("survey.top"))
}

// Each bad value is its own message, on its own line and key.
func TestParseProblems(t *testing.T) {
	_, err := Parse([]byte("probe_id: x\nsurvey:\n  top: 0\n  count: -1\n  timeout: soon\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "config line 5: survey.timeout")
	_, err = Parse([]byte("probe_id: x\nsurvey:\n  top: 0\n  count: -1\n"))
	var p Problems
	require.ErrorAs(t, err, &p)
	assert.Equal(t, Problems{"config line 3: survey.top: must be positive (got 0)",
		"config line 4: survey.count: must be in 1..1000 (got -1)"}, p)
}

// FuzzParse: the config decoder never panics, and what it accepts parses
// again to the same values.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "probe_id: x\n", "survey: {top: -5, rate: -1}\n", "survey:\n  timeout: 5 parsecs\n",
		"dns:\n  lo: [198.18.0.1, '[fd00::1]:53']\n", "run:\n  patterns: [ping]\n  pin: zz\n", "- a\n- b\n", "survey: [1]\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := Parse(b)
		if err != nil {
			return
		}
		again, err := Parse(b)
		if err != nil || again.Survey.Top != cfg.Survey.Top || again.Survey.Timeout != cfg.Survey.Timeout {
			t.Fatalf("reparse differs: %v", err)
		}
	})
}
