package version

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmdutil"
)

// The flags parse into Options and runF gets the command's context.
func TestNewCmdVersionSeam(t *testing.T) {
	o, err := cmdutil.RunSeam(NewCmdVersion, cmdutil.TestFactory(), "--json")
	require.NoError(t, err)
	assert.True(t, o.JSON)
	o, err = cmdutil.RunSeam(NewCmdVersion, cmdutil.TestFactory())
	require.NoError(t, err)
	assert.False(t, o.JSON)
	_, err = cmdutil.RunSeam(NewCmdVersion, cmdutil.TestFactory(), "extra")
	assert.Error(t, err, "version takes no arguments")
}
