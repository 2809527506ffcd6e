package collect

import (
	"context"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmdutil"
)

func TestNewCmdCollectSeam(t *testing.T) {
	o, err := cmdutil.RunSeam(NewCmdCollect, cmdutil.TestFactory(), "--data", "/srv/c", "--db", "postgres://c@db/c", "--listen", "127.0.0.1:0",
		"--plain-http", "--max-inflight", "3", "--drain", "2s", "--retry-after", "7s", "--name", "c.example,198.18.0.9")
	require.NoError(t, err)
	assert.Equal(t, "/srv/c", o.Data)
	assert.Equal(t, "postgres://c@db/c", o.DB)
	assert.Equal(t, "127.0.0.1:0", o.Listen)
	assert.True(t, o.PlainHTTP)
	assert.Equal(t, 3, o.Limits.MaxInFlight)
	assert.Equal(t, 2*time.Second, o.Drain)
	assert.Equal(t, 7*time.Second, o.Limits.RetryAfter)
	assert.Equal(t, []string{"c.example", "198.18.0.9"}, o.Names)
}

// leaf builds a subcommand that works on the stores of collect's options
// co, for RunSeam.
func leaf[O any](newCmd func(*cmdutil.Factory, *Options, func(context.Context, *O) error) *cobra.Command, co *Options) func(*cmdutil.Factory, func(context.Context, *O) error) *cobra.Command {
	return func(f *cmdutil.Factory, runF func(context.Context, *O) error) *cobra.Command {
		return newCmd(f, co, runF)
	}
}

func TestSubcommandSeams(t *testing.T) {
	f := cmdutil.TestFactory()
	co := &Options{IO: f.IO, Data: "/srv/c", DB: "postgres://c@db/c"}

	pa, err := cmdutil.RunSeam(leaf(NewCmdProbeAdd, co), f, "pi-kitchen", "--url", "https://198.18.0.9:8080")
	require.NoError(t, err)
	assert.Equal(t, "pi-kitchen", pa.Name)
	assert.Equal(t, "https://198.18.0.9:8080", pa.URL)
	assert.Same(t, co, pa.Collect)
	pa, err = cmdutil.RunSeam(leaf(NewCmdProbeAdd, co), f, "pi-hall")
	require.NoError(t, err)
	assert.Equal(t, "https://COLLECTOR:8080", pa.URL, "the placeholder when --url is not given")

	rv, err := cmdutil.RunSeam(leaf(NewCmdProbeRevoke, co), f, "pi-kitchen")
	require.NoError(t, err)
	assert.Equal(t, "pi-kitchen", rv.Name)
	assert.Same(t, co, rv.Collect, "the stores are collect's")
	assert.Same(t, f.IO, rv.IO)
	_, err = cmdutil.RunSeam(leaf(NewCmdProbeRevoke, co), f)
	assert.Error(t, err, "revoke needs a name")

	ls, err := cmdutil.RunSeam(leaf(NewCmdProbeList, co), f)
	require.NoError(t, err)
	assert.Same(t, co, ls.Collect)
	_, err = cmdutil.RunSeam(leaf(NewCmdProbeList, co), f, "extra")
	assert.Error(t, err)

	ad, err := cmdutil.RunSeam(leaf(NewCmdAdminAdd, co), f, "ops")
	require.NoError(t, err)
	assert.Equal(t, "ops", ad.Name)
	assert.Same(t, co, ad.Collect)

	ss, err := cmdutil.RunSeam(leaf(NewCmdScheduleSet, co), f, "*", "fleet.json")
	require.NoError(t, err)
	assert.Equal(t, "*", ss.Probe)
	assert.Equal(t, "fleet.json", ss.File)
	assert.Same(t, co, ss.Collect)
	_, err = cmdutil.RunSeam(leaf(NewCmdScheduleSet, co), f, "pi1")
	assert.Error(t, err, "set needs PROBE and FILE")

	kg, err := cmdutil.RunSeam(NewCmdScheduleKeygen, f, "/etc/mptester/schedule.key")
	require.NoError(t, err)
	assert.Equal(t, "/etc/mptester/schedule.key", kg.KeyFile)

	sg, err := cmdutil.RunSeam(NewCmdScheduleSign, f, "--key", "op.key", "--serial", "12", "--probe", "pi1", "fleet.json")
	require.NoError(t, err)
	assert.Equal(t, ScheduleSignOptions{IO: f.IO, Key: "op.key", Serial: 12, Probe: "pi1", File: "fleet.json"}, *sg)
	sg, err = cmdutil.RunSeam(NewCmdScheduleSign, f, "--key", "op.key", "--serial", "1", "fleet.json")
	require.NoError(t, err)
	assert.Equal(t, "*", sg.Probe, "default: every probe")
	_, err = cmdutil.RunSeam(NewCmdScheduleSign, f, "--serial", "1", "fleet.json")
	assert.ErrorContains(t, err, "key", "--key is required")

	ex, err := cmdutil.RunSeam(leaf(NewCmdExport, co), f, "--since", "2026-11-01", "--until", "2026-12-01", "--probe", "pi2", "-o", "fleet-nov")
	require.NoError(t, err)
	assert.Equal(t, "parquet", ex.Format)
	assert.Equal(t, "2026-11-01", ex.Since)
	assert.Equal(t, "2026-12-01", ex.Until)
	assert.Equal(t, "pi2", ex.Probe)
	assert.Equal(t, "fleet-nov", ex.Out)
	assert.Same(t, co, ex.Collect)

	gc, err := cmdutil.RunSeam(leaf(NewCmdGC, co), f, "--min-age", "90s", "--dry-run")
	require.NoError(t, err)
	assert.Equal(t, 90*time.Second, gc.MinAge)
	assert.True(t, gc.DryRun)
	assert.Same(t, co, gc.Collect)
	gc, err = cmdutil.RunSeam(leaf(NewCmdGC, co), f)
	require.NoError(t, err)
	assert.Equal(t, time.Hour, gc.MinAge)
	assert.False(t, gc.DryRun)

	co.Logger = nil
	ri, err := cmdutil.RunSeam(leaf(NewCmdReindex, co), f)
	require.NoError(t, err)
	assert.Same(t, co, ri.Collect)
	assert.Same(t, f.Logger, co.Logger, "the stores log through the root's logger")
}
