package patterns

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/mptester/mptester/internal/certs"
	"github.com/mptester/mptester/internal/dnstest"
	"github.com/mptester/mptester/probe"
)

func runOpts(t *testing.T, lo probe.Path, srv *testServer, servers ...string) RunOptions {
	return RunOptions{
		Servers: servers, Ports: map[string]uint16{tcpName: srv.tcpPort, quicName: srv.quicPort},
		Patterns: []string{"ping", "bulk"}, Transports: []string{tcpName, quicName},
		Paths: []probe.Path{lo}, Families: []probe.Family{probe.Family4}, Params: smallParams, Seed: 7,
		TLS: func(name string) (*tls.Config, error) { return certs.ClientTLS("localhost", srv.pin, false) },
	}
}

// TestRunSelectsAnsweringServer: a server that does not answer is never
// selected; the matrix then runs in the seeded order.
func TestRunSelectsAnsweringServer(t *testing.T) {
	lo := loopback(t)
	srv := startServer(t, Limits{})
	dead, _ := net.Listen("tcp4", "127.0.0.1:0")
	deadAddr := dead.Addr().String()
	dead.Close() // connection refused from now on
	var mu sync.Mutex
	var recs []any
	o := runOpts(t, lo, srv, deadAddr, fmt.Sprintf("127.0.0.1:%d", srv.tcpPort))
	o.Transports = []string{tcpName, mptcpName}
	o.Emit = func(r any) error { mu.Lock(); recs = append(recs, r); mu.Unlock(); return nil }
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Selected != fmt.Sprintf("127.0.0.1:%d", srv.tcpPort) || sum.Tests != 4 || len(sum.Failed) != 0 {
		t.Fatalf("summary %+v", sum)
	}
	sel := recs[0].(SelectionRecord)
	if len(sel.Probes) != 2 || sel.Probes[0].Status != StatusConnectionRefused || sel.Probes[1].Answered != 5 {
		t.Fatalf("selection %+v", sel)
	}
	// Same seed, same order.
	var order1, order2 []string
	for _, r := range recs[1:] {
		c := r.(Record).Config
		order1 = append(order1, c.Pattern+"/"+c.Transport)
	}
	o.Servers = o.Servers[1:]
	o.Emit = func(r any) error {
		if rec, ok := r.(Record); ok {
			order2 = append(order2, rec.Config.Pattern+"/"+rec.Config.Transport)
		}
		return nil
	}
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if strings.Join(order1, " ") != strings.Join(order2, " ") {
		t.Fatalf("seeded order differs: %v vs %v", order1, order2)
	}
}

// TestStableModeNetworkChange: a path losing its address mid-test marks
// that test invalid with the reason and stops the run. The interface list
// is faked (fault injection); the traffic is real.
func TestStableModeNetworkChange(t *testing.T) {
	lo := loopback(t)
	srv := startServer(t, Limits{})
	o := runOpts(t, lo, srv, fmt.Sprintf("127.0.0.1:%d", srv.tcpPort))
	o.Patterns = []string{"interactive"}
	o.Params.Duration = 3 * time.Second
	var calls atomic.Int32
	o.Stable, o.PollEvery = true, 50*time.Millisecond
	o.Discover = func(ctx context.Context) ([]probe.Path, error) {
		p := lo
		if calls.Add(1) > 10 { // ~0.5 s into the run
			p.Addrs = p.Addrs[:0]
		}
		return []probe.Path{p}, nil
	}
	recs := collectRecords(&o)
	start := time.Now()
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Invalid || !strings.Contains(sum.Reason, "network changed during test") || !strings.Contains(sum.Reason, lo.Name) {
		t.Fatalf("summary %+v", sum)
	}
	if len(*recs) != 1 || !(*recs)[0].Invalid || (*recs)[0].Status != StatusNetworkChanged {
		t.Fatalf("records %+v", *recs)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("run stopped after %v, want right after the change", el)
	}
	if !strings.Contains((*recs)[0].Error, "network changed during test") {
		t.Fatalf("invalid test error %q lacks the reason", (*recs)[0].Error)
	}
}

// testDNS is a real miekg/dns server on loopback: name -> addresses, and
// NXDOMAIN for any other name.
type testDNS map[string][]string

func (z testDNS) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	q := req.Question[0]
	addrs, ok := z[strings.ToLower(q.Name)]
	if !ok {
		m.Rcode = dns.RcodeNameError
	}
	for _, a := range addrs {
		ip := netip.MustParseAddr(a)
		hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: 60}
		switch {
		case ip.Is4() && q.Qtype == dns.TypeA:
			hdr.Rrtype = dns.TypeA
			m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: ip.AsSlice()})
		case ip.Is6() && q.Qtype == dns.TypeAAAA:
			hdr.Rrtype = dns.TypeAAAA
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: ip.AsSlice()})
		}
	}
	w.WriteMsg(m)
}

func startDNS(t *testing.T, z testDNS) netip.AddrPort { return dnstest.Serve(t, z) }

// noSystemResolver fails the test if the system resolver is asked.
func noSystemResolver(t *testing.T) {
	old := systemLookup
	systemLookup = func(_ context.Context, _, host string) ([]netip.Addr, error) {
		t.Errorf("system resolver asked for %q", host)
		return nil, errors.New("system resolver not allowed in this test")
	}
	t.Cleanup(func() { systemLookup = old })
}

// TestParseServerResolvesOnPath: a server name is resolved by the path's
// own DNS server through that path, never by the system resolver (which
// cannot resolve these names).
func TestParseServerResolvesOnPath(t *testing.T) {
	noSystemResolver(t)
	srv := startDNS(t, testDNS{"server.mpt.test.": {"198.18.0.77", "fd00::77"}})
	lo := loopback(t)
	lo.DNS = []probe.DNSServer{{Addr: srv, Source: probe.DNSSourceFlag}}
	o := RunOptions{Paths: []probe.Path{lo}, Families: []probe.Family{probe.Family4}}
	sv, err := parseServer(context.Background(), o, "server.mpt.test:8443")
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := sv.addr(lo, probe.Family4); !ok || a != netip.MustParseAddr("198.18.0.77") {
		t.Fatalf("IPv4 address on %s: %v %v", lo.Name, a, ok)
	}
	if a, ok := sv.addr(lo, probe.Family6); ok {
		t.Fatalf("IPv6 address %v resolved although only IPv4 was asked for", a)
	}
	if sv.host != "server.mpt.test" || sv.port != 8443 {
		t.Fatalf("server %+v", sv)
	}
	want := ServerResolution{Host: "server.mpt.test", Path: lo.Name, DNSServer: srv.String()}
	if r := sv.resolution(lo, probe.Family4); r == nil || *r != want {
		t.Fatalf("resolution %+v, want %+v", r, want)
	}
	// Both families: A and AAAA, each from the path's server.
	o.Families = []probe.Family{probe.Family4, probe.Family6}
	sv, err = parseServer(context.Background(), o, "server.mpt.test")
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := sv.addr(lo, probe.Family6); !ok || a != netip.MustParseAddr("fd00::77") {
		t.Fatalf("IPv6 address on %s: %v %v", lo.Name, a, ok)
	}
	if a, _ := sv.addr(lo, probe.FamilyAny); a != netip.MustParseAddr("198.18.0.77") {
		t.Fatalf("any family: %v, want the IPv4 answer first", a)
	}
	// Another path's answers are not this path's.
	other := lo
	other.Name = "other0"
	if _, ok := sv.addr(other, probe.Family4); ok {
		t.Fatal("an address for a path that resolved nothing")
	}
	// An IP literal needs no resolution.
	sv, err = parseServer(context.Background(), o, "[fd00::1]:9000")
	if err != nil || sv.resolution(lo, probe.Family6) != nil {
		t.Fatalf("literal: %+v %v", sv, err)
	}
	if a, _ := sv.addr(lo, probe.Family6); a != netip.MustParseAddr("fd00::1") || sv.port != 9000 {
		t.Fatalf("literal: %+v", sv)
	}
}

// TestParseServerNXDomain: a name the (only) path's DNS does not know is an
// error naming the server, the path, its DNS server and the status.
func TestParseServerNXDomain(t *testing.T) {
	noSystemResolver(t)
	srv := startDNS(t, testDNS{"server.mpt.test.": {"198.18.0.77"}})
	lo := loopback(t)
	lo.DNS = []probe.DNSServer{{Addr: srv, Source: probe.DNSSourceFlag}}
	o := RunOptions{Paths: []probe.Path{lo}, Families: []probe.Family{probe.Family4}}
	_, err := parseServer(context.Background(), o, "nosuch.mpt.test")
	if err == nil {
		t.Fatal("no error for a name the path's DNS does not know")
	}
	for _, s := range []string{`server "nosuch.mpt.test"`, "path " + lo.Name, srv.String(), "NXDOMAIN"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q lacks %q", err, s)
		}
	}
	// Run stops with that error before any test.
	o.Servers, o.Patterns, o.Transports = []string{"nosuch.mpt.test"}, []string{"ping"}, []string{tcpName}
	if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "NXDOMAIN") {
		t.Fatalf("run: %v", err)
	}
}

// TestParseServerSystemFallback: a path without DNS servers falls back to
// the system resolver, says so in the log and in the resolution.
func TestParseServerSystemFallback(t *testing.T) {
	old := systemLookup
	var asked atomic.Int32
	systemLookup = func(_ context.Context, _, host string) ([]netip.Addr, error) {
		asked.Add(1)
		return []netip.Addr{netip.MustParseAddr("::ffff:198.18.0.99")}, nil
	}
	t.Cleanup(func() { systemLookup = old })
	lo := loopback(t)
	lo.DNS = nil
	var logs bytes.Buffer
	o := RunOptions{Paths: []probe.Path{lo}, Families: []probe.Family{probe.Family4}, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	sv, err := parseServer(context.Background(), o, "server.mpt.test")
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := sv.addr(lo, probe.Family4); !ok || a != netip.MustParseAddr("198.18.0.99") {
		t.Fatalf("address %v %v", a, ok)
	}
	want := ServerResolution{Host: "server.mpt.test", Path: lo.Name, System: true}
	if r := sv.resolution(lo, probe.Family4); r == nil || *r != want || asked.Load() != 1 {
		t.Fatalf("resolution %+v (system asked %d times)", r, asked.Load())
	}
	if !strings.Contains(logs.String(), "path has no DNS server") {
		t.Fatalf("no warning logged: %s", logs.String())
	}
}

// TestRunNamedServer: a whole run against a server named in the path's DNS
// reaches the address that DNS gave and records how it was found.
func TestRunNamedServer(t *testing.T) {
	noSystemResolver(t)
	srv := startServer(t, Limits{})
	dnsSrv := startDNS(t, testDNS{"run.mpt.test.": {"127.0.0.1"}})
	lo := loopback(t)
	lo.DNS = []probe.DNSServer{{Addr: dnsSrv, Source: probe.DNSSourceFlag}}
	o := runOpts(t, lo, srv, "run.mpt.test")
	o.Patterns, o.Transports = []string{"ping"}, []string{tcpName, quicName}
	recs := collectRecords(&o)
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(*recs) != 2 || len(sum.Failed) != 0 {
		t.Fatalf("summary %+v", sum)
	}
	want := ServerResolution{Host: "run.mpt.test", Path: lo.Name, DNSServer: dnsSrv.String()}
	for _, r := range *recs {
		if r.Config.Server.Addr() != netip.MustParseAddr("127.0.0.1") || r.Config.ServerResolution == nil || *r.Config.ServerResolution != want {
			t.Fatalf("%s: server %v resolution %+v, want %+v", r.Config.Transport, r.Config.Server, r.Config.ServerResolution, want)
		}
	}
}

// TestRunPathThatCannotResolve: a path whose resolution of the server name
// fails gets dns-error records for its tests, naming the path, while the
// other path's tests run.
func TestRunPathThatCannotResolve(t *testing.T) {
	noSystemResolver(t)
	srv := startServer(t, Limits{})
	dnsSrv := startDNS(t, testDNS{"run.mpt.test.": {"127.0.0.1"}})
	lo := loopback(t)
	lo.DNS = []probe.DNSServer{{Addr: dnsSrv, Source: probe.DNSSourceFlag}}
	// A path whose interface does not exist: its DNS query cannot be bound.
	gone := lo
	gone.Name, gone.Index = "mpt-gone0", 0
	o := runOpts(t, lo, srv, "run.mpt.test")
	o.Paths = []probe.Path{lo, gone}
	o.Patterns, o.Transports = []string{"ping"}, []string{tcpName}
	recs := collectRecords(&o)
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(*recs) != 2 || len(sum.Failed) != 1 {
		t.Fatalf("%d records, %d failed: %+v", len(*recs), len(sum.Failed), sum)
	}
	for _, r := range *recs {
		switch r.Config.Path {
		case lo.Name:
			if r.Status != StatusSuccess {
				t.Errorf("%s: %s %s", lo.Name, r.Status, r.Error)
			}
		case gone.Name:
			if r.Status != StatusDNSError || !strings.Contains(r.Error, "path "+gone.Name) || r.Config.ServerResolution == nil {
				t.Errorf("%s: status %s, error %q, resolution %+v; want dns-error naming the path", gone.Name, r.Status, r.Error, r.Config.ServerResolution)
			}
		default:
			t.Errorf("record for path %q", r.Config.Path)
		}
	}
}

// collectRecords makes o.Emit keep the test records.
func collectRecords(o *RunOptions) *[]Record {
	recs := &[]Record{}
	o.Emit = func(r any) error {
		if rec, ok := r.(Record); ok {
			*recs = append(*recs, rec)
		}
		return nil
	}
	return recs
}
