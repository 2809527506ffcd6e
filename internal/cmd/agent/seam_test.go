package agent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmdutil"
)

func TestNewCmdAgentSeam(t *testing.T) {
	f := cmdutil.TestFactory()
	o, err := cmdutil.RunSeam(NewCmdAgent, f, "--once", "--state", "/var/lib/mptester-agent", "--poll", "90s")
	require.NoError(t, err)
	assert.True(t, o.Once)
	assert.Equal(t, "/var/lib/mptester-agent", o.State)
	assert.Equal(t, 90*time.Second, o.Poll)
	assert.Same(t, f, o.F)
	assert.Same(t, f.Logger, o.Logger)
	o, err = cmdutil.RunSeam(NewCmdAgent, cmdutil.TestFactory())
	require.NoError(t, err)
	assert.Equal(t, 5*time.Minute, o.Poll, "default poll")
	assert.False(t, o.Once)
}
