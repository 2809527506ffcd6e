package survey

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"log/slog"
	"sync/atomic"

	"github.com/miekg/dns"

	"github.com/mptester/mptester/internal/dnstest"
	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/report"
)

// testZone is served by a real miekg/dns server on loopback.
type testZone = dnstest.Zone

func defaultZone() *testZone {
	z := &testZone{
		A: map[string][]string{
			"open.test.":   {"127.0.0.1"},
			"closed.test.": {"127.0.0.2"},
			"multi.test.":  {"127.0.0.1", "127.0.0.3"},
			"c2.test.":     {"127.0.0.4"},
		},
		CNAME: map[string]string{"alias.test.": "c1.test.", "c1.test.": "c2.test."},
		Rcode: map[string]int{"nx.test.": dns.RcodeNameError, "fail.test.": dns.RcodeServerFailure, "refused.test.": dns.RcodeRefused},
		Hang:  map[string]bool{"hang.test.": true},
	}
	for i := 1; i <= 100; i++ { // too big for one 1232-byte UDP answer
		z.A["big.test."] = append(z.A["big.test."], fmt.Sprintf("127.0.1.%d", i))
	}
	z.A["empty.test."] = nil
	return z
}

// defaultDomains lists the zone's names in rank order.
func defaultDomains() []Domain {
	names := []string{"open.test", "closed.test", "multi.test", "alias.test", "nx.test", "fail.test", "refused.test", "hang.test", "big.test", "empty.test"}
	out := make([]Domain, len(names))
	for i, n := range names {
		out[i] = Domain{Rank: i + 1, Name: n}
	}
	return out
}

// startDNS serves z on 127.0.0.1 (UDP and TCP on the same port).
func startDNS(t testing.TB, z *testZone) netip.AddrPort { return dnstest.Serve(t, z) }

// startListener accepts TCP on 127.0.0.1 (an open port); every other
// 127/8 address answers that port with RST.
func startListener(t testing.TB) int { return startListenerFunc(t, nil) }

// startListenerFunc is startListener calling accepted (if not nil) on
// every accepted connection.
func startListenerFunc(t testing.TB, accepted func()) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if accepted != nil {
				accepted()
			}
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// loopback returns the "lo" path with dns as its resolver.
func loopback(t testing.TB, dnsAddr netip.AddrPort) probe.Path {
	t.Helper()
	paths, err := probe.Discover(context.Background(), probe.DiscoverOptions{FlagDNS: map[string][]netip.AddrPort{"lo": {dnsAddr}}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := probe.FindPath(paths, "lo")
	if err != nil {
		t.Skipf("no loopback path: %v", err)
	}
	return p
}

// runToBuffer runs a survey writing JSON Lines into a buffer.
func runToBuffer(t testing.TB, ctx context.Context, cfg Config, w *bytes.Buffer) (Summary, error) {
	t.Helper()
	h, err := report.NewHeader("survey", "test", cfg.Paths, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := report.NewStream(w, h)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Run(ctx, cfg, st)
	st.Close(report.Status(s.Status), "")
	return s, err
}

// records decodes every line of a JSON Lines output, by type.
func records(t testing.TB, b []byte) map[string][]json.RawMessage {
	t.Helper()
	out := map[string][]json.RawMessage{}
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var k struct{ Type string }
		if err := json.Unmarshal(l, &k); err != nil {
			t.Fatalf("bad line %q: %v", l, err)
		}
		out[k.Type] = append(out[k.Type], append(json.RawMessage(nil), l...))
	}
	return out
}

func baseConfig(p probe.Path, port int) Config {
	return Config{Paths: []probe.Path{p}, Domains: defaultDomains(), Family: probe.Family4, Method: "tcp-connect",
		Port: port, Count: 3, Timeout: 500 * time.Millisecond, Spacing: 5 * time.Millisecond, Rate: 2000, Burst: 10,
		DNSTimeout: 300 * time.Millisecond, DNSRetries: 1}
}

type atomicInt = atomic.Int64

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func netListenUDP() (net.PacketConn, error) { return net.ListenPacket("udp4", "127.0.0.1:0") }
