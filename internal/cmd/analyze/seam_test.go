package analyze

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmdutil"
)

func TestNewCmdAnalyzeSeam(t *testing.T) {
	o, err := cmdutil.RunSeam(NewCmdAnalyze, cmdutil.TestFactory(), "--format", "json", "--strict", "--idle-timeout", "30s", "a.pcap", "b.pcapng")
	require.NoError(t, err)
	assert.Equal(t, []string{"a.pcap", "b.pcapng"}, o.Inputs)
	assert.Equal(t, "json", o.Format)
	assert.True(t, o.Strict)
	assert.Equal(t, 30*time.Second, o.IdleTimeout)
}
