package ctl

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmdutil"
)

// Each control subcommand's flags and arguments parse into its options,
// and runF gets the command's context.
func TestCtlSeams(t *testing.T) {
	f := cmdutil.TestFactory()
	down, err := cmdutil.RunSeam(NewCmdDown, f, "--name", "x", "--purge")
	require.NoError(t, err)
	assert.Equal(t, "x", down.Where.Name)
	assert.True(t, down.Purge)

	st, err := cmdutil.RunSeam(NewCmdStatus, f, "--dir", "/tmp/lab-x", "--json")
	require.NoError(t, err)
	assert.Equal(t, "/tmp/lab-x", st.Where.Dir)
	assert.Equal(t, "default", st.Where.Name)
	assert.True(t, st.JSON)

	set, err := cmdutil.RunSeam(NewCmdSet, f, "--name", "x", "wlan0", "delay=200ms", "loss=30%")
	require.NoError(t, err)
	assert.Equal(t, "wlan0", set.Path)
	assert.Equal(t, []string{"delay=200ms", "loss=30%"}, set.Args)

	sc, err := cmdutil.RunSeam(NewCmdScenario, f, "--name", "x", "wifi-blackhole")
	require.NoError(t, err)
	assert.Equal(t, "wifi-blackhole", sc.Name)
	assert.Equal(t, "x", sc.Where.Name)

	ex, err := cmdutil.RunSeam(NewCmdExec, f, "--side", "server", "--", "ss", "-tln")
	require.NoError(t, err)
	assert.Equal(t, "server", ex.Side)
	assert.Equal(t, []string{"ss", "-tln"}, ex.Command)

	run, err := cmdutil.RunSeam(NewCmdRun, f, "--name", "t1", "--wlan0", "delay=25ms", "--no-serve", "--", "ping", "-c", "5")
	require.NoError(t, err)
	assert.Equal(t, "client", run.Side, "default side")
	assert.Equal(t, "delay=25ms", run.Build.WLAN)
	assert.True(t, run.NoServe)
	assert.Equal(t, []string{"ping", "-c", "5"}, run.Command)
	assert.Same(t, f.Logger, run.Logger)

	_, err = cmdutil.RunSeam(NewCmdSet, f, "wlan0")
	assert.Error(t, err, "set needs a setting")
}
