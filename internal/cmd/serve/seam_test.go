package serve

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmdutil"
)

func TestNewCmdServeSeam(t *testing.T) {
	f := cmdutil.TestFactory()
	o, err := cmdutil.RunSeam(NewCmdServe, f, "--listen", "198.18.0.1", "--tcp-port", "8443", "--quic-port", "8443,6121",
		"--transports", "tcp,quic", "--state", "/var/lib/mptester-serve", "--name", "srv.example", "--max-sessions", "9", "--max-duration", "45s", "--mpquic-cc", "lia")
	require.NoError(t, err)
	assert.Equal(t, "198.18.0.1", o.Listen)
	assert.Equal(t, []int{8443}, o.Ports["tcp"])
	assert.Equal(t, []int{8443, 6121}, o.Ports["quic"])
	assert.Equal(t, []string{"tcp", "quic"}, o.Transports)
	assert.Equal(t, "/var/lib/mptester-serve", o.State)
	assert.Equal(t, []string{"srv.example"}, o.Names)
	assert.Equal(t, 9, o.Limits.MaxSessions)
	assert.Equal(t, 45*time.Second, o.Limits.MaxDuration)
	assert.Equal(t, "lia", o.MPQUICCC)
	assert.Same(t, f.Logger, o.Logger)

	// Defaults: QUIC also on its alternative port.
	o, err = cmdutil.RunSeam(NewCmdServe, cmdutil.TestFactory())
	require.NoError(t, err)
	assert.Equal(t, []int{443, 6121}, o.Ports["quic"])
	_, err = cmdutil.RunSeam(NewCmdServe, cmdutil.TestFactory(), "extra")
	assert.Error(t, err, "serve takes no arguments")
}
