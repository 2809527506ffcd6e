package nw_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/probe/nw"
	"github.com/mptester/mptester/probe/nw/nwfake"
)

// server accepts one connection on loopback and runs h on it.
func server(t *testing.T, h func(c *net.TCPConn)) (host, port string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		h(c.(*net.TCPConn))
	}()
	ap := ln.Addr().(*net.TCPAddr).AddrPort()
	return ap.Addr().String(), strconv.Itoa(int(ap.Port()))
}

// clean checks that every object was released once and none was used
// after its release or after cancelled.
func clean(t *testing.T, f *nwfake.Fake) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, f.WaitIdle(ctx))
	assert.Empty(t, f.Leaks(), "objects not released")
	assert.Empty(t, f.Violations())
	assert.NotZero(t, f.Created())
}

func dial(t *testing.T, f *nwfake.Fake, host, port string, cfg nw.Config) *nw.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := nw.Dial(ctx, f, host, port, cfg)
	require.NoError(t, err)
	return c
}

// The stream carries bytes both ways intact, partial reads keep the rest
// for the next Read, and the counters are the bytes that went through.
func TestStreamIntactWithPartialReads(t *testing.T) {
	f := nwfake.New()
	const size = 3<<20 + 17
	host, port := server(t, func(c *net.TCPConn) {
		_, _ = io.Copy(c, c) // echo until the client's FIN
		_ = c.CloseWrite()
	})
	c := dial(t, f, host, port, nw.Config{Service: nw.ServiceInteractive})
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	go func() {
		_, _ = c.Write(data)
		_ = c.CloseWrite()
	}()
	h := sha256.New()
	var got int
	buf := make([]byte, 1000) // smaller than what each receive brings
	for {
		n, err := c.Read(buf[:1+rand.IntN(len(buf)-1)])
		h.Write(buf[:n])
		got += n
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
	}
	assert.Equal(t, size, got)
	assert.Equal(t, sha256.Sum256(data), [32]byte(h.Sum(nil)))
	sent, recv := c.Bytes()
	assert.Equal(t, uint64(size), sent)
	assert.Equal(t, uint64(size), recv)
	require.NoError(t, c.Close())
	clean(t, f)
}

// CloseWrite ends only the sending direction: the server sees EOF and can
// still answer.
func TestCloseWriteHalfClose(t *testing.T) {
	f := nwfake.New()
	host, port := server(t, func(c *net.TCPConn) {
		b, _ := io.ReadAll(c)
		_, _ = c.Write(append([]byte("got "), b...))
	})
	c := dial(t, f, host, port, nw.Config{Service: nw.ServiceHandover})
	_, err := c.Write([]byte("hello"))
	require.NoError(t, err)
	require.NoError(t, c.CloseWrite())
	_, err = c.Write([]byte("more"))
	assert.ErrorIs(t, err, syscall.EPIPE)
	b, err := io.ReadAll(c)
	require.NoError(t, err)
	assert.Equal(t, "got hello", string(b))
	require.NoError(t, c.Close())
	clean(t, f)
}

// A read deadline ends a Read with a timeout; the receive it left
// outstanding delivers its data to the next Read.
func TestReadDeadlineKeepsLateData(t *testing.T) {
	f := nwfake.New()
	send := make(chan struct{})
	host, port := server(t, func(c *net.TCPConn) {
		<-send
		_, _ = c.Write([]byte("late"))
		_, _ = io.Copy(io.Discard, c)
	})
	c := dial(t, f, host, port, nw.Config{Service: nw.ServiceInteractive})
	require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
	buf := make([]byte, 16)
	_, err := c.Read(buf)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	assert.True(t, ne.Timeout())
	close(send)
	require.NoError(t, c.SetReadDeadline(time.Time{}))
	n, err := c.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "late", string(buf[:n]))
	require.NoError(t, c.Close())
	clean(t, f)
}

// A deadline set while a Read waits wakes it.
func TestDeadlineWakesBlockedRead(t *testing.T) {
	f := nwfake.New()
	host, port := server(t, func(c *net.TCPConn) { _, _ = io.Copy(io.Discard, c) })
	c := dial(t, f, host, port, nw.Config{Service: nw.ServiceInteractive})
	errc := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 8))
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond) // let it block (the result holds either way)
	require.NoError(t, c.SetDeadline(time.Now()))
	assert.ErrorIs(t, <-errc, os.ErrDeadlineExceeded)
	require.NoError(t, c.Close())
	clean(t, f)
}

// Writes to a peer that does not read fill the window and end at the
// write deadline.
func TestWriteDeadline(t *testing.T) {
	f := nwfake.New()
	stop := make(chan struct{})
	host, port := server(t, func(c *net.TCPConn) { <-stop })
	defer close(stop)
	c := dial(t, f, host, port, nw.Config{Service: nw.ServiceInteractive})
	require.NoError(t, c.SetWriteDeadline(time.Now().Add(300*time.Millisecond)))
	chunk := make([]byte, 1<<20)
	var err error
	for i := 0; i < 256 && err == nil; i++ {
		_, err = c.Write(chunk)
	}
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.NoError(t, c.Close())
	clean(t, f)
}

// Close lets the queued data go before it cancels.
func TestCloseSendsQueuedData(t *testing.T) {
	f := nwfake.New()
	got := make(chan int, 1)
	host, port := server(t, func(c *net.TCPConn) {
		n, _ := io.Copy(io.Discard, c)
		got <- int(n)
	})
	c := dial(t, f, host, port, nw.Config{Service: nw.ServiceInteractive})
	n, err := c.Write(make([]byte, 900<<10))
	require.NoError(t, err)
	require.NoError(t, c.Close())
	assert.Equal(t, n, <-got)
	_, err = c.Write([]byte("x"))
	assert.ErrorIs(t, err, net.ErrClosed)
	assert.ErrorIs(t, c.Close(), net.ErrClosed)
	clean(t, f)
}

// Close ends a Read that waits.
func TestCloseUnblocksRead(t *testing.T) {
	f := nwfake.New()
	host, port := server(t, func(c *net.TCPConn) { _, _ = io.Copy(io.Discard, c) })
	c := dial(t, f, host, port, nw.Config{Service: nw.ServiceInteractive})
	errc := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 8))
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, c.Close())
	assert.ErrorIs(t, <-errc, net.ErrClosed)
	clean(t, f)
}

// A refused connection: the framework goes to waiting with ECONNREFUSED;
// the dial fails with it at once and gives everything back.
func TestDialRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	f := nwfake.New()
	_, err = nw.Dial(context.Background(), f, "127.0.0.1", port, nw.Config{Service: nw.ServiceInteractive})
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	clean(t, f)
}

// The documented failure orders: preparing then waiting (no usable path)
// or failed; each fails the dial with the framework's error.
func TestDialWaitingAndFailed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script nwfake.Script
		want   error
	}{
		{"waiting", nwfake.Script{Outcome: nwfake.Wait, Err: &nw.Error{Domain: nw.DomainPOSIX, Code: int(syscall.ENETDOWN)}}, syscall.ENETDOWN},
		{"waiting-no-error", nwfake.Script{Outcome: nwfake.Wait}, nil},
		{"failed", nwfake.Script{Outcome: nwfake.Fail, Err: &nw.Error{Domain: nw.DomainPOSIX, Code: int(syscall.ETIMEDOUT)}}, syscall.ETIMEDOUT},
		{"failed-dns", nwfake.Script{Outcome: nwfake.Fail, Err: &nw.Error{Domain: nw.DomainDNS, Code: -65554}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := nwfake.New()
			f.SetScript(tc.script)
			_, err := nw.Dial(context.Background(), f, "192.0.2.1", "443", nw.Config{Service: nw.ServiceInteractive})
			require.Error(t, err)
			if tc.want != nil {
				assert.ErrorIs(t, err, tc.want)
			}
			if tc.script.Err != nil {
				var ne *nw.Error
				require.ErrorAs(t, err, &ne)
				assert.Equal(t, *tc.script.Err, *ne)
			}
			clean(t, f)
		})
	}
}

// Cancelling the context while the framework prepares cancels the
// connection, waits for cancelled and releases it.
func TestDialContextCancel(t *testing.T) {
	f := nwfake.New()
	f.SetScript(nwfake.Script{Outcome: nwfake.Hang})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err := nw.Dial(ctx, f, "192.0.2.1", "443", nw.Config{Service: nw.ServiceInteractive})
	require.ErrorIs(t, err, context.Canceled)
	clean(t, f)
}

// A failure after ready (a reset) ends the waiting Read and later Writes
// with the framework's error.
func TestFailureAfterReady(t *testing.T) {
	f := nwfake.New()
	host, port := server(t, func(c *net.TCPConn) { _, _ = io.Copy(io.Discard, c) })
	c := dial(t, f, host, port, nw.Config{Service: nw.ServiceInteractive})
	errc := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 8))
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	reset := &nw.Error{Domain: nw.DomainPOSIX, Code: int(syscall.ECONNRESET)}
	f.Conns()[0].Fail(reset)
	assert.ErrorIs(t, <-errc, syscall.ECONNRESET)
	require.Eventually(t, func() bool { return c.State() == nw.StateFailed }, 5*time.Second, 5*time.Millisecond)
	_, err := c.Write([]byte("x"))
	assert.ErrorIs(t, err, syscall.ECONNRESET)
	_, err = c.Read(make([]byte, 8))
	assert.ErrorIs(t, err, syscall.ECONNRESET)
	require.NoError(t, c.Close())
	clean(t, f)
}

// Waiting after ready (the path was lost, the framework looks for
// another) is not an end: the stream goes on.
func TestWaitingAfterReadyGoesOn(t *testing.T) {
	f := nwfake.New()
	host, port := server(t, func(c *net.TCPConn) {
		_, _ = io.Copy(c, c)
	})
	c := dial(t, f, host, port, nw.Config{Service: nw.ServiceHandover})
	f.Conns()[0].Waiting(&nw.Error{Domain: nw.DomainPOSIX, Code: int(syscall.ENETDOWN)})
	require.Eventually(t, func() bool { return c.State() == nw.StateWaiting }, 5*time.Second, 5*time.Millisecond)
	_, err := c.Write([]byte("still"))
	require.NoError(t, err)
	buf := make([]byte, 5)
	_, err = io.ReadFull(c, buf)
	require.NoError(t, err)
	assert.Equal(t, "still", string(buf))
	require.NoError(t, c.Close())
	clean(t, f)
}

// The configuration becomes the connection's parameters: the service, the
// primary's interface (required), the prohibited
// types; the path reports the interface and the effective endpoints.
func TestParametersAndPath(t *testing.T) {
	f := nwfake.New()
	f.Interfaces = []nw.Interface{{Name: "en0", Index: 4, Type: nw.InterfaceWiFi}, {Name: "pdp_ip0", Index: 9, Type: nw.InterfaceCellular}}
	host, port := server(t, func(c *net.TCPConn) { _, _ = io.Copy(io.Discard, c) })
	c := dial(t, f, host, port, nw.Config{Service: nw.ServiceAggregate, Interface: "en0",
		Prohibit: []nw.InterfaceType{nw.InterfaceWired}})
	assert.WithinDuration(t, time.Now(), c.Started(), 10*time.Second)
	ps := f.Params()
	require.Len(t, ps, 1)
	assert.Equal(t, nwfake.Params{Service: nw.ServiceAggregate, Interface: "en0",
		Prohibit: []nw.InterfaceType{nw.InterfaceWired}}, ps[0])
	pi, err := c.Path()
	require.NoError(t, err)
	assert.Equal(t, nw.PathSatisfied, pi.Status)
	assert.Equal(t, []nw.Interface{{Name: "en0", Index: 4, Type: nw.InterfaceWiFi}}, pi.Interfaces)
	assert.Equal(t, c.LocalAddr().String(), pi.Local.String())
	assert.Equal(t, net.JoinHostPort(host, port), c.RemoteAddr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r := c.EstablishmentReport(ctx)
	require.NotNil(t, r)
	assert.Equal(t, "tcp", r.Protocols[0].Name)
	require.NoError(t, c.Close())
	_, err = c.Path()
	assert.ErrorIs(t, err, net.ErrClosed)
	assert.Nil(t, c.EstablishmentReport(ctx))
	clean(t, f)
}

// An interface the framework does not know fails the dial before a
// connection exists, with everything given back.
func TestUnknownInterface(t *testing.T) {
	f := nwfake.New()
	_, err := nw.Dial(context.Background(), f, "127.0.0.1", "1", nw.Config{Service: nw.ServiceInteractive, Interface: "en9"})
	require.ErrorContains(t, err, "en9")
	assert.Empty(t, f.Conns())
	clean(t, f)
}

// The fake itself notices misuse, so the checks above can fail.
func TestFakeSeesMisuse(t *testing.T) {
	f := nwfake.New()
	ep, err := f.NewEndpoint("127.0.0.1", "1")
	require.NoError(t, err)
	assert.NotEmpty(t, f.Leaks())
	f.Release(ep)
	f.Release(ep)
	_, err = f.NewConnection(ep, ep)
	assert.Error(t, err)
	assert.Len(t, f.Violations(), 3)
	assert.Empty(t, f.Leaks())
}

func TestParseService(t *testing.T) {
	for _, n := range nw.ServiceNames {
		s, err := nw.ParseService(n)
		require.NoError(t, err)
		assert.Equal(t, n, s.String())
	}
	_, err := nw.ParseService("fast")
	assert.ErrorContains(t, err, "handover, interactive, aggregate")
	assert.True(t, errors.Is((&nw.Error{Domain: nw.DomainPOSIX, Code: int(syscall.ECONNREFUSED)}), syscall.ECONNREFUSED))
	assert.True(t, bytes.Contains([]byte((&nw.Error{Domain: nw.DomainDNS, Code: 1}).Error()), []byte("DNS")))
}

func TestDecodeSockaddr(t *testing.T) {
	in4 := []byte{16, 2, 0x01, 0xbb, 198, 18, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}
	assert.Equal(t, "198.18.0.1:443", nw.DecodeSockaddr(in4).String())
	in6 := make([]byte, 28)
	in6[0], in6[1], in6[2], in6[3] = 28, 30, 0x1f, 0x90
	copy(in6[8:], netip.MustParseAddr("fd00::1").AsSlice())
	assert.Equal(t, "[fd00::1]:8080", nw.DecodeSockaddr(in6).String())
	assert.False(t, nw.DecodeSockaddr(in6[:20]).IsValid())
	assert.False(t, nw.DecodeSockaddr([]byte{16, 1, 0, 0}).IsValid())
}
