//go:build linux

package cmd

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmdutil"
)

// TestServeHalfOpenDoNotExhaust: 2,000 connections that send two bytes of
// a TLS record and stop (from 200 loopback addresses, 10 each) wait in the
// handshake stage; they hold no session slot, so a real client finishes its
// tests while they are all still open. Bounded: 2,000 loopback
// connections, under 30 s.
func TestServeHalfOpenDoNotExhaust(t *testing.T) {
	if testing.Short() {
		t.Skip("2,000 connections")
	}
	// The handshake timeout outlasts the test: the half-open connections
	// stay for all of it.
	addr := startServe(t, "--handshake-timeout", "60s", "--read-timeout", "60s")
	_, port, _ := net.SplitHostPort(addr)

	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i := range 2000 {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(2+i/10))}, Timeout: 2 * time.Second}
		c, err := d.Dial("tcp", addr)
		require.NoError(t, err, "connection %d", i)
		_, err = c.Write([]byte{0x16, 0x03}) // the start of a TLS record, then nothing
		require.NoError(t, err)
		held = append(held, c)
	}
	time.Sleep(300 * time.Millisecond) // the server has accepted them

	start := time.Now()
	io, out, errOut := cmdutil.Test()
	code := Run(context.Background(), io, []string{"run", "--server", "127.0.0.1", "--tcp-port", port,
		"--insecure", "--paths", "lo", "--patterns", "ping,bulk", "--transports", "tcp,mptcp", "--size", "1000000",
		"--ping-count", "3", "--pace", "0s", "--connect-timeout", "3s", "--log-level", "warn"})
	elapsed := time.Since(start)
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	var doc struct {
		Records []struct {
			Status string `json:"status"`
		} `json:"records"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
	require.Len(t, doc.Records, 4)
	for _, r := range doc.Records {
		assert.Equal(t, "success", r.Status)
	}
	assert.Less(t, elapsed, 15*time.Second, "the real client's tests")
	// Every half-open connection is still open: they did not simply time out.
	for i, c := range held[:10] {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		ne, ok := err.(net.Error)
		assert.True(t, ok && ne.Timeout(), fmt.Sprintf("half-open connection %d was closed: %v", i, err))
	}
}

// TestServeRefusedTCPClientToldWhy: a TCP client refused for a limit reads
// the reason (a 503 over HTTP, an error frame on the stream patterns), as a
// QUIC client reads it in CONNECTION_CLOSE, not "tls handshake: EOF".
func TestServeRefusedTCPClientToldWhy(t *testing.T) {
	addr := startServe(t, "--max-sessions", "1", "--max-per-client", "1")
	_, port, _ := net.SplitHostPort(addr)
	// One finished handshake takes the only session slot.
	hold, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	require.NoError(t, err)
	defer hold.Close()

	for _, pattern := range []string{"ping", "interactive"} {
		io, out, errOut := cmdutil.Test()
		code := Run(context.Background(), io, []string{"run", "--server", "127.0.0.1", "--tcp-port", port,
			"--insecure", "--paths", "lo", "--patterns", pattern, "--transports", "tcp", "--duration", "300ms",
			"--ping-count", "2", "--pace", "0s", "--log-level", "error"})
		require.Equal(t, cmdutil.ExitPartial, code, "%s\n%s", out, errOut)
		assert.Contains(t, out.String(), "at its limit of 1 sessions", pattern)
		assert.Contains(t, out.String(), `"status": "server-refused"`, pattern)
	}
}

// startServe runs `mptester serve` on free loopback ports until the test
// ends and returns its TCP address once it accepts.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	u, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	qport := u.LocalAddr().(*net.UDPAddr).Port
	u.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(cancel)
	sio, _, serr := cmdutil.Test()
	wg.Go(func() {
		Run(ctx, sio, append([]string{"serve", "--listen", "127.0.0.1", "--tcp-port", strconv.Itoa(port),
			"--quic-port", strconv.Itoa(qport), "--log-level", "error"}, args...))
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 5*time.Second, 20*time.Millisecond, "serve did not start: %s", serr)
	return addr
}
