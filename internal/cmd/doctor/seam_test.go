package doctor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmdutil"
)

func TestNewCmdDoctorSeam(t *testing.T) {
	o, err := cmdutil.RunSeam(NewCmdDoctor, cmdutil.TestFactory(), "--json", "--dns", "wwan0=198.18.2.1", "--dns", "wlan0=198.18.1.1,fd00:1::1")
	require.NoError(t, err)
	assert.True(t, o.JSON)
	assert.Equal(t, []string{"wwan0=198.18.2.1", "wlan0=198.18.1.1,fd00:1::1"}, o.DNS)
	assert.NotNil(t, o.Checks, "the real checks unless a test plants others")

	o, err = cmdutil.RunSeam(NewCmdDoctor, cmdutil.TestFactory())
	require.NoError(t, err)
	assert.False(t, o.JSON)
	assert.Empty(t, o.DNS)
	_, err = cmdutil.RunSeam(NewCmdDoctor, cmdutil.TestFactory(), "extra")
	assert.Error(t, err, "doctor takes no arguments")
}
