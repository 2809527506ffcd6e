package world

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// serveLoopback runs the view of path on 127.0.0.1, UDP and TCP on the
// same ephemeral port, until the test ends. It returns "127.0.0.1:port".
func serveLoopback(t *testing.T, w *World, path string) string {
	t.Helper()
	var udp net.PacketConn
	var tcp net.Listener
	for try := 0; ; try++ {
		u, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", u.LocalAddr().String())
		if err == nil {
			udp, tcp = u, l
			break
		}
		u.Close()
		if try > 20 {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, w, path, udp, tcp) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve(%s): %v", path, err)
		}
	})
	return udp.LocalAddr().String()
}

const testTimeout = 300 * time.Millisecond

func exchange(t *testing.T, network, server, name string, qt uint16, edns bool) (*dns.Msg, error) {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: testTimeout}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qt)
	if edns {
		m.SetEdns0(4096, false)
	}
	in, _, err := c.Exchange(m, server)
	return in, err
}

func answerAddrs(m *dns.Msg) (addrs []netip.Addr, cnames []string) {
	for _, rr := range m.Answer {
		switch rr := rr.(type) {
		case *dns.A:
			a, _ := netip.AddrFromSlice(rr.A.To4())
			addrs = append(addrs, a)
		case *dns.AAAA:
			a, _ := netip.AddrFromSlice(rr.AAAA)
			addrs = append(addrs, a)
		case *dns.CNAME:
			cnames = append(cnames, rr.Target)
		}
	}
	return addrs, cnames
}

func TestDNSCategoriesAsPlanted(t *testing.T) {
	w := mustGenerate(t, Options{Seed: 5, Domains: 60})
	servers := map[string]string{}
	for _, p := range w.Paths {
		servers[p] = serveLoopback(t, w, p)
	}
	checked := map[string]bool{}
	for _, d := range w.Domains {
		for _, v := range d.Views {
			srv := servers[v.Path]
			what := fmt.Sprintf("%s (%s) on %s", d.Name, d.Category, v.Path)
			for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
				in, err := exchange(t, "udp", srv, d.Name, qt, true)
				if v.Status == StatusTimeout {
					var ne net.Error
					if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
						t.Errorf("%s: want no reply, got %v, %v", what, in, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if v.Large {
					if !in.Truncated || len(in.Answer) != 0 {
						t.Errorf("%s: UDP reply of a large answer not truncated (TC=%v, %d RRs)", what, in.Truncated, len(in.Answer))
					}
					if in, err = exchange(t, "tcp", srv, d.Name, qt, true); err != nil {
						t.Fatalf("%s over TCP: %v", what, err)
					}
					if in.Truncated {
						t.Errorf("%s: TC over TCP", what)
					}
				} else if in.Truncated {
					t.Errorf("%s: small answer truncated", what)
				}
				want := map[string]int{StatusNoError: dns.RcodeSuccess, StatusNoAnswer: dns.RcodeSuccess,
					StatusNXDomain: dns.RcodeNameError, StatusServFail: dns.RcodeServerFailure}[v.Status]
				if in.Rcode != want {
					t.Errorf("%s: rcode %s, want %s", what, dns.RcodeToString[in.Rcode], dns.RcodeToString[want])
				}
				addrs, cn := answerAddrs(in)
				wantAddrs := v.A
				if qt == dns.TypeAAAA {
					wantAddrs = v.AAAA
				}
				if !slices.Equal(addrs, wantAddrs) {
					t.Errorf("%s type %s: addresses %v, want %v", what, dns.TypeToString[qt], addrs, wantAddrs)
				}
				var wantCN []string
				for _, c := range v.CNAMEs {
					wantCN = append(wantCN, c+".")
				}
				if !slices.Equal(cn, wantCN) {
					t.Errorf("%s: CNAME chain %v, want %v", what, cn, wantCN)
				}
			}
			checked[d.Category] = true
		}
	}
	for _, c := range []string{CatSame, CatDiffer, CatOnePath, CatNXDomain, CatServFail, CatTimeout, CatNoAnswer, CatLarge, CatPrivate} {
		if !checked[c] {
			t.Errorf("category %s not planted in the test world", c)
		}
	}
}

func TestDNSEdgeCases(t *testing.T) {
	w := handWorld(t)
	a := netip.MustParseAddr
	// A CNAME chain on wwan0 only, and a large answer.
	w.Domains[1].Views[1].CNAMEs = []string{"h1.b2.cdn.example", "h2.b2.v1.cdn.example"}
	var large []netip.Addr
	for i := 1; i <= 40; i++ {
		x := a(fmt.Sprintf("198.19.1.%d", i))
		w.Targets[x] = &Target{}
		large = append(large, x)
	}
	w.Domains = append(w.Domains, Domain{Name: "big.example", Category: CatLarge, Views: []View{
		{Path: "wlan0", Status: StatusNoError, A: large, Large: true},
		{Path: "wwan0", Status: StatusNoError, A: large[:3], Large: true}, // Large but small: TC anyway
	}})
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	wlan, wwan := serveLoopback(t, w, "wlan0"), serveLoopback(t, w, "wwan0")

	rcode := func(srv, name string, qt uint16) int {
		in, err := exchange(t, "udp", srv, name, qt, false)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return in.Rcode
	}
	if rc := rcode(wlan, "www.google.com", dns.TypeA); rc != dns.RcodeRefused {
		t.Errorf("outside the zone: %s, want REFUSED", dns.RcodeToString[rc])
	}
	if rc := rcode(wlan, "nothere.example", dns.TypeA); rc != dns.RcodeNameError {
		t.Errorf("unknown name: %s, want NXDOMAIN", dns.RcodeToString[rc])
	}
	if rc := rcode(wlan, "h1.b2.cdn.example", dns.TypeA); rc != dns.RcodeNameError {
		t.Errorf("wwan0-only CNAME hop on wlan0: %s, want NXDOMAIN", dns.RcodeToString[rc])
	}
	// Case-insensitive, question echoed as asked.
	in, err := exchange(t, "udp", wlan, "A1.Example", dns.TypeA, false)
	if err != nil || len(in.Answer) != 1 || in.Answer[0].Header().Name != "A1.Example." {
		t.Errorf("mixed case: %v %v", in, err)
	}
	// MX on an existing name: NOERROR, nothing.
	if in, err := exchange(t, "udp", wlan, "a1.example", dns.TypeMX, false); err != nil || in.Rcode != 0 || len(in.Answer) != 0 {
		t.Errorf("MX: %v %v", in, err)
	}
	// CNAME chain from the domain and from the middle hop; qtype CNAME.
	in, _ = exchange(t, "udp", wwan, "b2.example", dns.TypeA, false)
	addrs, cn := answerAddrs(in)
	if fmt.Sprint(cn, addrs) != "[h1.b2.cdn.example. h2.b2.v1.cdn.example.] [198.19.0.3]" {
		t.Errorf("chain: %v %v", cn, addrs)
	}
	in, _ = exchange(t, "udp", wwan, "h1.b2.cdn.example", dns.TypeA, false)
	if addrs, cn := answerAddrs(in); fmt.Sprint(cn, addrs) != "[h2.b2.v1.cdn.example.] [198.19.0.3]" {
		t.Errorf("chain from hop 1: %v %v", cn, addrs)
	}
	in, _ = exchange(t, "udp", wwan, "b2.example", dns.TypeCNAME, false)
	if addrs, cn := answerAddrs(in); fmt.Sprint(cn, addrs) != "[h1.b2.cdn.example.] []" {
		t.Errorf("qtype CNAME: %v %v", cn, addrs)
	}
	// Large: truncated over UDP with and without EDNS0, full over TCP.
	for _, edns := range []bool{false, true} {
		in, err := exchange(t, "udp", wlan, "big.example", dns.TypeA, edns)
		if err != nil || !in.Truncated || len(in.Answer) != 0 {
			t.Errorf("large over UDP (edns %v): TC=%v, %d RRs, %v", edns, in != nil && in.Truncated, len(in.Answer), err)
		}
	}
	in, err = exchange(t, "tcp", wlan, "big.example", dns.TypeA, true)
	if addrs, _ := answerAddrs(in); err != nil || in.Truncated || !slices.Equal(addrs, large) {
		t.Errorf("large over TCP: %d addresses, %v", len(addrs), err)
	}
	in, _ = exchange(t, "udp", wwan, "big.example", dns.TypeA, false)
	if !in.Truncated {
		t.Error("Large view with a small answer: no TC over UDP")
	}
	// Observe does the fallback and reports it.
	r, tcp, err := Observe(context.Background(), nil, wlan, "big.example", 0)
	if err != nil || !tcp || r.Status != StatusNoError || len(r.Addrs) != 40 {
		t.Errorf("Observe large: %+v tcp=%v %v", r, tcp, err)
	}
	// TIMEOUT also over TCP.
	if _, err := exchange(t, "tcp", wwan, "e5.example", dns.TypeA, false); err == nil {
		t.Error("timeout domain answered over TCP")
	}
	// A cancelled context is an error, not a status.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := Observe(ctx, nil, wlan, "a1.example", 0); err == nil {
		t.Error("Observe with cancelled ctx: no error")
	}
	if _, err := w.DNSHandler("eth0"); err == nil {
		t.Error("handler for unknown path")
	}
}

// TestServedMatchesTruth re-derives every domain's per-path resolution by
// querying the served views and compares it with Truth: truth.json
// matches what the lab serves, at the DNS level.
func TestServedMatchesTruth(t *testing.T) {
	w := mustGenerate(t, Options{Seed: 42, Domains: 150})
	servers := map[string]string{}
	for _, p := range w.Paths {
		servers[p] = serveLoopback(t, w, p)
	}
	c := &dns.Client{Timeout: testTimeout}
	ctx := context.Background()
	for _, fam := range []int{0, 4, 6} {
		tr, err := w.Truth(ExpectOptions{Family: fam})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range tr.Paths {
			if err := tr.CheckServed(ctx, c, p, servers[p], 32); err != nil {
				t.Errorf("family %d: %v", fam, err)
			}
		}
	}
	// The check can fail: a truth that disagrees with the server.
	tr, _ := w.Truth(ExpectOptions{})
	for i := range tr.Domains {
		if r := tr.Domains[i].Paths["wwan0"]; r.Status == StatusNoError {
			r.Addrs = r.Addrs[1:]
			tr.Domains[i].Paths["wwan0"] = r
			break
		}
	}
	tr.Domains[3].Paths["wlan0"] = Resolution{Status: StatusServFail}
	if err := tr.CheckServed(ctx, c, "wwan0", servers["wwan0"], 8); err == nil || !strings.Contains(err.Error(), "1 of 150") {
		t.Errorf("altered truth on wwan0: %v", err)
	}
	// wlan0 truth checked against the wwan0 server: differing domains.
	if err := tr.CheckServed(ctx, c, "wlan0", servers["wwan0"], 8); err == nil {
		t.Error("wlan0 truth matched the wwan0 view")
	} else {
		t.Logf("expected mismatch: %.200s", err)
	}
	if err := tr.CheckServed(ctx, c, "eth0", servers["wwan0"], 8); err == nil {
		t.Error("unknown path accepted")
	}
}

func TestServeErrors(t *testing.T) {
	w := handWorld(t)
	if err := Serve(context.Background(), w, "wlan0", nil, nil); err == nil {
		t.Error("no sockets: no error")
	}
	if err := Serve(context.Background(), w, "eth0", nil, nil); err == nil {
		t.Error("unknown path: no error")
	}
	// A closed socket fails the server: Serve returns the error.
	u, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := Serve(ctx, w, "wlan0", u, l); err == nil || ctx.Err() != nil {
		t.Errorf("closed listener: %v (ctx %v)", err, ctx.Err())
	}
}
