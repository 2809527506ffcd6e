package sweep

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmdutil"
)

func TestNewCmdSweepSeam(t *testing.T) {
	o, err := cmdutil.RunSeam(NewCmdSweep, cmdutil.TestFactory(), "--preset", "004-rtt", "--quick", "--sizes", "128KiB,2MiB",
		"--transports", "mptcp,tcp", "--primaries", "wlan0", "--reps", "2", "--wwan0-rtt", "20ms,80ms", "--wwan0-loss", "0%,5%",
		"--timeout", "45s", "-o", "rtt.jsonl", "--csv", "rtt.csv", "--settle", "100ms")
	require.NoError(t, err)
	assert.Equal(t, "sweep", o.Where.Name, "the sweep's own default name")
	assert.Equal(t, "004-rtt", o.Preset)
	assert.True(t, o.Quick)
	assert.Equal(t, []string{"128KiB", "2MiB"}, o.Sizes)
	assert.Equal(t, []string{"mptcp", "tcp"}, o.Transports)
	assert.Equal(t, []string{"wlan0"}, o.Primaries)
	assert.Equal(t, 2, o.Reps)
	assert.Equal(t, []string{"20ms", "80ms"}, o.WWANRTT)
	assert.Equal(t, []string{"0%", "5%"}, o.WWANLoss)
	assert.Equal(t, 45*time.Second, o.Timeout)
	assert.Equal(t, "rtt.jsonl", o.Output)
	assert.Equal(t, "rtt.csv", o.CSV)
	assert.Equal(t, 100*time.Millisecond, o.Settle)
	assert.True(t, o.changed("reps"))
	assert.False(t, o.changed("file"))
}

func TestNewCmdSweepWorkerSeam(t *testing.T) {
	o, err := cmdutil.RunSeam(NewCmdSweepWorker, cmdutil.TestFactory(), "--pin", "0f0f")
	require.NoError(t, err)
	assert.Equal(t, "0f0f", o.Pin)
}
