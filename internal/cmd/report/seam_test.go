package report

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmdutil"
)

func TestNewCmdReportSeam(t *testing.T) {
	o, err := cmdutil.RunSeam(NewCmdReport, cmdutil.TestFactory(), "--format", "md", "--section", "rtt-cdf", "--svg", "figs", "a.jsonl", "b.json")
	require.NoError(t, err)
	assert.Equal(t, []string{"a.jsonl", "b.json"}, o.Files)
	assert.Equal(t, "md", o.Format)
	assert.Equal(t, "rtt-cdf", o.Section)
	assert.Equal(t, "figs", o.SVGDir)
	o, err = cmdutil.RunSeam(NewCmdReport, cmdutil.TestFactory(), "--db", "collect.db", "--probe", "p1", "--type", "run", "--since", "2026-11-01", "--until", "2026-11-02")
	require.NoError(t, err)
	assert.Empty(t, o.Files)
	assert.Equal(t, "collect.db", o.DB)
	assert.Equal(t, "p1", o.Probe)
	assert.Equal(t, "run", o.Type)
	assert.Equal(t, "2026-11-01", o.Since)
	assert.Equal(t, "2026-11-02", o.Until)
	assert.Equal(t, "text", o.Format, "default format")
}
