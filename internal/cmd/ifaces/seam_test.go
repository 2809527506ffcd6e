package ifaces

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmdutil"
)

func TestNewCmdIfacesSeam(t *testing.T) {
	o, err := cmdutil.RunSeam(NewCmdIfaces, cmdutil.TestFactory(), "--json", "--dns", "wwan0=198.18.100.2", "--dns", "wlan0=198.18.100.1,fd00:100::1")
	require.NoError(t, err)
	assert.True(t, o.JSON)
	assert.Equal(t, []string{"wwan0=198.18.100.2", "wlan0=198.18.100.1,fd00:100::1"}, o.DNS, "--dns is repeatable and keeps commas")
	assert.NotNil(t, o.Discover)
}
