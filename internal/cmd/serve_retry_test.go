//go:build linux

package cmd

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/mpquic"
)

// TestServeMPQUICRetry: `serve --mpquic-retry` answers a client's first
// Initial with a Retry (its integrity tag checked against the Initial's
// DCID), and an mpquic probe, which follows it, completes its tests.
func TestServeMPQUICRetry(t *testing.T) {
	u, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	mport := u.LocalAddr().(*net.UDPAddr).Port
	u.Close()
	addr := startServe(t, "--mpquic-port", strconv.Itoa(mport), "--mpquic-retry")
	_, port, _ := net.SplitHostPort(addr)

	// A client's first Initial (a PING, padded), by hand.
	dcid, scid := []byte{1, 2, 3, 4, 5, 6, 7, 8}, []byte{8, 7, 6, 5, 4, 3, 2, 1}
	client, _ := mpquic.InitialKeys(dcid)
	payload := append(mpquic.PingFrame{}.Append(nil), make([]byte, 1200)...)
	hdr, err := mpquic.AppendLongHeader(nil, mpquic.LongHeader{Type: mpquic.PacketInitial, DCID: dcid, SCID: scid}, 0, 2, len(payload))
	require.NoError(t, err)
	pkt, err := client.Protect(nil, hdr, payload, 0, 0)
	require.NoError(t, err)
	c, err := net.Dial("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(mport)))
	require.NoError(t, err)
	defer c.Close()
	buf := make([]byte, 1500)
	var n int
	for i := 0; i < 20; i++ { // until the listener is up
		_, err = c.Write(pkt)
		require.NoError(t, err)
		_ = c.SetReadDeadline(time.Now().Add(250 * time.Millisecond))
		if n, err = c.Read(buf); err == nil {
			break
		}
	}
	require.NoError(t, err, "no answer to the Initial")
	h, _, err := mpquic.ParseHeader(buf[:n], 8)
	require.NoError(t, err)
	require.Equal(t, mpquic.PacketRetry, h.Type, "the answer to a first Initial")
	assert.Equal(t, scid, h.DCID)
	assert.NotEmpty(t, h.Token)
	assert.True(t, mpquic.VerifyRetry(buf[:n], dcid), "the Retry's integrity tag")

	io, out, errOut := cmdutil.Test()
	code := Run(context.Background(), io, []string{"run", "--server", "127.0.0.1", "--tcp-port", port,
		"--mpquic-port", strconv.Itoa(mport), "--insecure", "--paths", "lo", "--patterns", "ping,bulk",
		"--transports", "mpquic", "--size", "1000000", "--ping-count", "3", "--pace", "0s",
		"--connect-timeout", "5s", "--log-level", "warn"})
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	var doc struct {
		Records []struct {
			Status string `json:"status"`
		} `json:"records"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
	require.Len(t, doc.Records, 2)
	for _, r := range doc.Records {
		assert.Equal(t, "success", r.Status)
	}
}
