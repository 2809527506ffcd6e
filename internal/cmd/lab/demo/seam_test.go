package demo

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmdutil"
)

func TestNewCmdDemoSeam(t *testing.T) {
	o, err := cmdutil.RunSeam(NewCmdDemo, cmdutil.TestFactory())
	require.NoError(t, err)
	assert.Equal(t, "demo", o.Where.Name, "the demo's own default name")
	assert.Equal(t, 100, o.Build.Domains, "the demo's own default world size")
	o, err = cmdutil.RunSeam(NewCmdDemo, cmdutil.TestFactory(), "--name", "d2", "--domains", "20", "--wwan0", "delay=60ms")
	require.NoError(t, err)
	assert.Equal(t, "d2", o.Where.Name)
	assert.Equal(t, 20, o.Build.Domains)
	assert.Equal(t, "delay=60ms", o.Build.WWAN)
}
