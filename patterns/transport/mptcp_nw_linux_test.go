package transport_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/certs"
	"github.com/mptester/mptester/patterns"
	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/probe/nw"
	"github.com/mptester/mptester/probe/nw/nwfake"
)

// needMPTCP skips (fails under CI) where the kernel has MPTCP off.
func needMPTCP(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/mptcp/enabled")
	if err == nil && strings.TrimSpace(string(b)) == "1" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("kernel MPTCP is off (net.mptcp.enabled: %q, %v)", b, err)
	}
	t.Skip("kernel MPTCP is off: sysctl -w net.mptcp.enabled=1")
}

// syncBuffer is a log sink for a server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func fakeFor(lo probe.Path) *nwfake.Fake {
	f := nwfake.New()
	f.Interfaces = []nw.Interface{{Name: lo.Name, Index: lo.Index, Type: nw.InterfaceLoopback}}
	return f
}

// clean: every Network.framework object the adapter took was given back
// once and none was used after.
func clean(t *testing.T, f *nwfake.Fake) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, f.WaitIdle(ctx))
	assert.Empty(t, f.Leaks(), "objects not released")
	assert.Empty(t, f.Violations())
}

// get does one request on conn and returns the response (body read).
func get(t *testing.T, conn transport.Conn, addr netip.AddrPort) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr.String()+"/ping/x", nil)
	require.NoError(t, err)
	resp, err := conn.RoundTripper().RoundTrip(req)
	require.NoError(t, err)
	_, _ = bytes.NewBuffer(nil).ReadFrom(resp.Body)
	resp.Body.Close()
	return resp
}

func dialHTTP(t *testing.T, name string, lo probe.Path, addr netip.AddrPort, pin string) transport.Conn {
	t.Helper()
	cfg, err := certs.ClientTLS("localhost", pin, false)
	require.NoError(t, err)
	tr, err := transport.New(name, transport.Options{Paths: []transport.PathRole{{Path: lo, Role: transport.RolePrimary}},
		Family: probe.Family4, TLS: cfg})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := tr.Dial(ctx, addr, transport.FamilyHTTP)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

func status(t *testing.T, conn transport.Conn) *transport.MPTCPStatus {
	t.Helper()
	st, ok := conn.Info().Facts.(*transport.MPTCPStatus)
	require.True(t, ok, "facts %#v", conn.Info().Facts)
	return st
}

func summary(conns ...transport.Conn) *transport.MPTCPSummary {
	d, _ := transport.Get("mptcp")
	var cs []transport.ConnSamples
	for _, c := range conns {
		cs = append(cs, transport.ConnSamples{Info: c.Info(), Samples: []transport.State{c.Sample()}})
	}
	return d.Summarise(cs).(*transport.MPTCPSummary)
}

// TestServerSaysClientMPTCP: `serve` tells each client, per connection,
// whether it spoke MPTCP, and logs it: a kernel MPTCP client is MPTCP, a
// plain TCP client is not, and an MPTCP client of a server listening
// without MPTCP fell back (both sides say so, and the smoke check fails).
func TestServerSaysClientMPTCP(t *testing.T) {
	needMPTCP(t)
	lo := loopbackPath(t)
	cert, pin := selfSigned(t)
	var logs syncBuffer
	srv := startHTTPServer(t, patterns.ServerConfig{Certificate: cert, Listen: map[string][]string{"tcp": {"127.0.0.1:0"}},
		Transports: []string{"tcp", "mptcp"}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	addr := netip.MustParseAddrPort(srv.Addrs("tcp")[0].String())

	mp := dialHTTP(t, "mptcp", lo, addr, pin)
	resp := get(t, mp, addr)
	assert.Equal(t, "yes", resp.Header.Get(transport.HeaderClientMPTCP))
	st := status(t, mp)
	require.NotNil(t, st.Negotiated)
	assert.True(t, *st.Negotiated)
	require.NotNil(t, st.ServerSaw)
	assert.True(t, *st.ServerSaw)
	assert.Empty(t, summary(mp).Degraded())

	tcp := dialHTTP(t, "tcp", lo, addr, pin)
	assert.Equal(t, "no", get(t, tcp, addr).Header.Get(transport.HeaderClientMPTCP))

	assert.Contains(t, logs.String(), fmt.Sprintf("client=%s alpn=h2 mptcp=true", mp.Info().Local))
	assert.Contains(t, logs.String(), fmt.Sprintf("client=%s alpn=h2 mptcp=false", tcp.Info().Local))

	// A server whose listener is plain TCP: the MPTCP client falls back.
	plain := startHTTPServer(t, patterns.ServerConfig{Certificate: cert, Listen: map[string][]string{"tcp": {"127.0.0.1:0"}},
		Transports: []string{"tcp"}})
	paddr := netip.MustParseAddrPort(plain.Addrs("tcp")[0].String())
	fb := dialHTTP(t, "mptcp", lo, paddr, pin)
	assert.Equal(t, "no", get(t, fb, paddr).Header.Get(transport.HeaderClientMPTCP))
	st = status(t, fb)
	require.NotNil(t, st.Negotiated)
	assert.False(t, *st.Negotiated)
	require.NotNil(t, st.ServerSaw)
	assert.False(t, *st.ServerSaw)
	assert.NotEmpty(t, summary(fb).Degraded())
}

// TestMPTCPThroughNetworkFramework: the mptcp transport as it runs on
// macOS, with nwfake in place of Network.framework (its sockets are
// kernel MPTCP here): the same TLS and pin, the server's word on MPTCP
// recorded where the client cannot tell, samples that name what they
// cannot measure, and every object released.
func TestMPTCPThroughNetworkFramework(t *testing.T) {
	needMPTCP(t)
	lo := loopbackPath(t)
	f := fakeFor(lo)
	defer transport.UseNetworkFramework(f)()
	cert, pin := selfSigned(t)
	srv := startHTTPServer(t, patterns.ServerConfig{Certificate: cert, Listen: map[string][]string{"tcp": {"127.0.0.1:0"}},
		Transports: []string{"tcp", "mptcp"}})
	addr := netip.MustParseAddrPort(srv.Addrs("tcp")[0].String())

	conn := dialHTTP(t, "mptcp", lo, addr, pin)
	st := status(t, conn)
	assert.Nil(t, st.Negotiated, "the client cannot tell by itself")
	assert.Nil(t, st.ServerSaw)
	assert.Equal(t, "interactive", st.Service)
	require.NotNil(t, st.Establishment)
	assert.Equal(t, []nwfake.Params{{Service: nw.ServiceInteractive, Interface: lo.Name,
		Prohibit: []nw.InterfaceType{nw.InterfaceWiFi, nw.InterfaceCellular, nw.InterfaceWired, nw.InterfaceOther}}}, f.Params())

	assert.Equal(t, "yes", get(t, conn, addr).Header.Get(transport.HeaderClientMPTCP))
	require.NotNil(t, st.ServerSaw)
	assert.True(t, *st.ServerSaw)

	s := conn.Sample()
	require.Empty(t, s.Err)
	assert.Equal(t, "nw_path", s.Key)
	ns, ok := s.Data.(*transport.NetworkFrameworkState)
	require.True(t, ok)
	assert.Equal(t, []transport.NWInterface{{Interface: nw.Interface{Name: lo.Name, Index: lo.Index, Type: nw.InterfaceLoopback}, Path: lo.Name}}, ns.Interfaces)
	assert.Equal(t, conn.Info().Local, ns.Local.String())
	assert.Contains(t, ns.Unavailable, "subflows")
	assert.Contains(t, ns.Unavailable, "retransmissions")
	sent, recv := ns.Bytes()
	assert.NotZero(t, sent)
	assert.NotZero(t, recv)
	_, unknown := s.Data.(transport.RetransUnknown)
	assert.True(t, unknown)

	sum := summary(conn)
	require.NotNil(t, sum.Negotiated, "the server's word stands in")
	assert.True(t, *sum.Negotiated)
	assert.Zero(t, sum.Subflows)
	assert.Empty(t, sum.Degraded())

	conn.Close() // the HTTP client may have closed it already
	clean(t, f)
}

// TestConformanceNetworkFramework holds the mptcp transport through the
// adapter to the stream suite (deadlines, half-close, refused and silent
// servers, cancellation), nwfake in place of Network.framework, and
// checks that every object was released.
func TestConformanceNetworkFramework(t *testing.T) {
	lo := loopbackPath(t)
	d, err := transport.Get("mptcp")
	require.NoError(t, err)
	for _, fam := range []probe.Family{probe.Family4, probe.Family6} {
		t.Run(fmt.Sprintf("v%d", fam), func(t *testing.T) {
			f := fakeFor(lo)
			restore := transport.UseNetworkFramework(f)
			ip := netip.MustParseAddr("127.0.0.1")
			if fam == probe.Family6 {
				ip = netip.IPv6Loopback()
			}
			e := env{paths: []transport.PathRole{{Path: lo, Role: transport.RolePrimary}}, family: fam,
				server: func(t *testing.T, d *transport.Descriptor) (netip.AddrPort, string) {
					cert, pin := selfSigned(t)
					sock, addr := listenLocal(t, d.Network, netip.AddrPortFrom(ip, 0))
					echoFor(t, d, sock, cert)
					return addr, pin
				},
				silent: localSilent(ip), closedPort: localClosed(ip)}
			t.Run("suite", func(t *testing.T) { conform(t, d, e, nil) })
			restore()
			clean(t, f)
		})
	}
}
