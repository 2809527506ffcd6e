package collect

import (
	"testing"
	"time"

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

	// probe add shares the seam: the name and --url parse into the options.
	o, err = cmdutil.RunSeam(NewCmdCollect, cmdutil.TestFactory(), "probe", "add", "pi-kitchen", "--url", "https://198.18.0.9:8080", "--data", "/srv/c")
	require.NoError(t, err)
	assert.Equal(t, "pi-kitchen", o.Name)
	assert.Equal(t, "https://198.18.0.9:8080", o.URL)
	assert.Equal(t, "/srv/c", o.Data)
}
