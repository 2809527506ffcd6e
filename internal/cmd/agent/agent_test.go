package agent

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShippedConfig: the packages' default config parses strictly, and so
// does its commented upload example once uncommented.
func TestShippedConfig(t *testing.T) {
	b, err := os.ReadFile("../../../packaging/mptester.yaml")
	require.NoError(t, err)
	cfg, err := cmdutil.ParseConfig(b)
	require.NoError(t, err)
	assert.Nil(t, cfg.Upload, "installed without an upload section: the agent stays idle until configured")
	example := regexp.MustCompile(`(?m)^# (upload:|agent:|  [a-z_]+:.*)$`).ReplaceAllString(string(b), "$1")
	cfg, err = cmdutil.ParseConfig([]byte(example))
	require.NoError(t, err, example)
	require.NotNil(t, cfg.Upload)
	assert.Equal(t, "/etc/mptester/upload.token", cfg.Upload.TokenFile)
	unit, err := os.ReadFile("../../../packaging/systemd/mptester-agent.service")
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(unit), "agent --once"))
	gr, err := os.ReadFile("../../../goreleaser.yaml")
	require.NoError(t, err)
	for _, f := range []string{"packaging/systemd/mptester-agent.service", "packaging/systemd/mptester-agent.timer", "packaging/mptester.yaml"} {
		assert.Contains(t, string(gr), "src: "+f)
	}
}
