package up

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmdutil"
)

// The flags parse into the options (the lab's name and directory, what
// shapes it) and runF gets the command's context.
func TestNewCmdUpSeam(t *testing.T) {
	o, err := cmdutil.RunSeam(NewCmdUp, cmdutil.TestFactory(), "--name", "t1", "--dir", "/tmp/t1", "--domains", "40", "--world-seed", "7",
		"--wlan0", "delay=5ms loss=1%", "--wwan0", "delay=40ms", "--cell-backup", "--timeline", "wifi-blackhole",
		"--world-share", "differ=0.4", "--world-share", "dead=0.05", "--timeout", "30s", "--no-serve")
	require.NoError(t, err)
	assert.Equal(t, "t1", o.Where.Name)
	assert.Equal(t, "/tmp/t1", o.Where.Dir)
	assert.Equal(t, 40, o.Build.Domains)
	assert.Equal(t, int64(7), o.Build.WorldSeed)
	assert.Equal(t, "delay=5ms loss=1%", o.Build.WLAN)
	assert.Equal(t, "delay=40ms", o.Build.WWAN)
	assert.True(t, o.Build.CellBackup)
	assert.Equal(t, "wifi-blackhole", o.Build.Timeline)
	assert.Equal(t, []string{"differ=0.4", "dead=0.05"}, o.Build.Shares)
	assert.Equal(t, 30*time.Second, o.Timeout)
	assert.True(t, o.NoServe)
	// What up hands the daemon is what it parsed.
	assert.Equal(t, []string{"--world-seed=7", "--domains=40", "--cell-backup", "--timeline=wifi-blackhole",
		"--world-share=differ=0.4,dead=0.05", "--wlan0=delay=5ms loss=1%", "--wwan0=delay=40ms"}, o.Build.Args())
}

func TestNewCmdDaemonSeam(t *testing.T) {
	o, err := cmdutil.RunSeam(NewCmdDaemon, cmdutil.TestFactory(), "--name", "t2", "--domains", "3", "--no-serve")
	require.NoError(t, err)
	assert.Equal(t, "t2", o.Where.Name)
	assert.Equal(t, 3, o.Build.Domains)
	assert.True(t, o.NoServe)
}
