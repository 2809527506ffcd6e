package fetch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmdutil"
)

func TestNewCmdFetchSeam(t *testing.T) {
	o, err := cmdutil.RunSeam(NewCmdFetch, cmdutil.TestFactory(), "https://198.18.200.1/bulk/1000/x", "--paths", "wlan0,wwan0", "--family", "6",
		"--tolerance", "50ms", "--memory-cap", "1048576", "--json", "--insecure", "--stall-timeout", "3s", "--timeout", "1m", "--dns", "wwan0=198.18.100.2")
	require.NoError(t, err)
	assert.Equal(t, "https://198.18.200.1/bulk/1000/x", o.URL)
	assert.Equal(t, []string{"wlan0", "wwan0"}, o.Paths)
	assert.Equal(t, "6", o.Family)
	assert.Equal(t, 50*time.Millisecond, o.Tolerance)
	assert.Equal(t, int64(1048576), o.MemoryCap)
	assert.True(t, o.JSON)
	assert.True(t, o.Insecure)
	assert.Equal(t, 3*time.Second, o.StallTimeout)
	assert.Equal(t, time.Minute, o.Timeout)
	assert.Equal(t, []string{"wwan0=198.18.100.2"}, o.DNS)
	_, err = cmdutil.RunSeam(NewCmdFetch, cmdutil.TestFactory())
	assert.Error(t, err, "fetch needs a URL")
}
