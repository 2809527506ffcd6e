package linkstats

import (
	"net"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The loopback interface exists everywhere Linux runs; its counters move
// when a packet crosses it.
func TestReadLoopback(t *testing.T) {
	if runtime.GOOS != "linux" {
		require.ErrorIs(t, Read([]string{"lo"}, make([]Counters, 1), nil), ErrUnsupported)
		return
	}
	names := []string{"lo", "no-such-if0"}
	before, found := make([]Counters, 2), make([]bool, 2)
	require.NoError(t, Read(names, before, found))
	require.Equal(t, []bool{true, false}, found)

	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer c.Close()
	for range 10 {
		_, err := c.WriteTo([]byte("x"), c.LocalAddr())
		require.NoError(t, err)
	}
	after := make([]Counters, 2)
	require.NoError(t, Read(names, after, found))
	assert.GreaterOrEqual(t, after[0].TxPackets-before[0].TxPackets, uint64(10))
	assert.GreaterOrEqual(t, after[0].RxPackets-before[0].RxPackets, uint64(10))
	// 10 datagrams of 1 byte: at least 10 x 29 bytes (IPv4 + UDP headers).
	assert.GreaterOrEqual(t, after[0].TxBytes-before[0].TxBytes, uint64(10*29))
	assert.GreaterOrEqual(t, after[0].RxBytes-before[0].RxBytes, uint64(10*29))
	assert.Zero(t, after[1])
}

func TestQueueDrops(t *testing.T) {
	c := Counters{RxDropped: 100, TxDropped: 1, RxOverErrors: 2, RxFifoErrors: 4, RxMissedErrors: 8}
	assert.Equal(t, uint64(15), c.QueueDrops())
}
