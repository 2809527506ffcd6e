package lab_test

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/labtest"
	"github.com/mptester/mptester/probe"
)

// A cgnat wwan0 has its IPv4 address in 100.64.0.0/10 behind a stateful
// NAT: a server sees the NAT's public address, nothing from the Internet
// opens a connection to the client, and the cellular core server answers
// wwan0 only (seeing the client's own address). wlan0 is the clean
// control of each check.
func TestLabCGNAT(t *testing.T) {
	requireNft(t)
	yes := true
	l := labtest.Start(t, lab.Options{Impair: map[string]lab.ImpairChange{"wwan0": {CGNAT: &yes}}})
	if labtest.IsChild() {
		return
	}
	c := lab.CGNATOf("wwan0")
	st := l.Status(t)
	if len(st.Impairments) != 1 || st.Impairments[0].Kind != "cgnat" || st.Impairments[0].Path != "wwan0" ||
		st.Impairments[0].Address != c.Client4.String() || st.Impairments[0].Public != c.Public.String() || st.Impairments[0].Core != c.Core.String() {
		t.Errorf("status impairments %+v, want wwan0 cgnat %s -> %s, core %s", st.Impairments, c.Client4, c.Public, c.Core)
	}
	for _, p := range l.Config().Paths {
		if p.Name == "wwan0" && p.Client4 != c.Client4 {
			t.Errorf("lab.json wwan0 client_ipv4 %s, want %s", p.Client4, c.Client4)
		}
	}
	ns := l.Config().Namespaces
	wlan, _ := lab.Plan("wlan0")
	listen := func(side string, addr netip.AddrPort) net.Listener { return listenIn(t, side, addr) }
	seen := seenFrom
	srv := listen(ns.Internet, netip.AddrPortFrom(lab.Server4, 40099))
	core := listen(ns.Internet, netip.AddrPortFrom(c.Core, 40098))
	for _, k := range []struct {
		what, side string
		src        netip.Addr
		ln         net.Listener
		want       string
	}{
		{"wwan0 to a server: the NAT's public address", ns.Client, c.Client4, srv, c.Public.String()},
		{"wlan0 to a server: its own address", ns.Client, wlan.Client4, srv, wlan.Client4.String()},
		{"wwan0 to the core server: its own address", ns.Client, c.Client4, core, c.Client4.String()},
		{"wlan0 to the core server: unreachable", ns.Client, wlan.Client4, core, ""},
	} {
		if got := seen(k.side, k.src, k.ln); got != k.want {
			t.Errorf("%s: server saw %q, want %q", k.what, got, k.want)
		}
	}
	// Unsolicited inbound: the Internet opens connections to wlan0's
	// client, never to wwan0's.
	for _, k := range []struct {
		src  netip.Addr
		want bool
	}{{c.Client4, false}, {wlan.Client4, true}} {
		cl := listen(ns.Client, netip.AddrPortFrom(k.src, 40097))
		if got := seen(ns.Internet, lab.Server4, cl) != ""; got != k.want {
			t.Errorf("inbound connection to %s: %v, want %v", k.src, got, k.want)
		}
	}
}

// listenIn listens on TCP addr inside namespace side until the test ends.
func listenIn(t *testing.T, side string, addr netip.AddrPort) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := lab.InNS(side, func() (err error) {
		ln, err = net.Listen("tcp", addr.String())
		return err
	}); err != nil {
		t.Fatalf("listen %s in %s: %v", addr, side, err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// seenFrom dials ln (or dst when valid) from src inside namespace side
// and returns the source address ln's side accepted ("" when the dial
// failed).
func seenFrom(side string, src netip.Addr, ln net.Listener, dst ...netip.AddrPort) string {
	type res struct {
		a   string
		err error
	}
	ch := make(chan res, 1)
	go func() {
		_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(3 * time.Second))
		a, err := ln.Accept()
		if err != nil {
			ch <- res{err: err}
			return
		}
		ch <- res{a: a.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap().String()}
		a.Close()
	}()
	to := ln.Addr().String()
	if len(dst) > 0 {
		to = dst[0].String()
	}
	err := lab.InNS(side, func() error {
		d := net.Dialer{Timeout: 1500 * time.Millisecond, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))}
		cn, err := d.Dial("tcp", to)
		if err == nil {
			cn.Close()
		}
		return err
	})
	if err != nil {
		_ = ln.(*net.TCPListener).SetDeadline(time.Now()) // nothing is coming
	}
	r := <-ch
	if err != nil || r.err != nil {
		return ""
	}
	return r.a
}

// nat64 and cgnat on one path (the mobile-v6only world's cellular path):
// wwan0 is IPv6-only, tayga maps its address to 100.64.2.2 (the
// translator's IPv4 side) and nftables SNAT hides that behind the NAT's
// public address; the cellular core server is reached through the NAT64
// from wwan0 (seeing 100.64.2.2) and from nowhere else; nothing from the
// Internet reaches the client through the translator's static map.
func TestLabNAT64CGNAT(t *testing.T) {
	requireNft(t)
	requireNAT64(t)
	yes := true
	l := labtest.Start(t, lab.Options{Impair: map[string]lab.ImpairChange{"wwan0": {NAT64: &yes, CGNAT: &yes}}})
	if labtest.IsChild() {
		return
	}
	c, n := lab.CGNATOf("wwan0"), lab.NAT64Behind("wwan0", true)
	kinds := map[string]lab.ImpairmentTruth{}
	for _, im := range l.Status(t).Impairments {
		if im.Path == "wwan0" {
			kinds[im.Kind] = im
		}
	}
	if cg := kinds["cgnat"]; len(kinds) != 2 || kinds["nat64"].Prefix != n.Prefix.String() || cg.Address != c.Client4.String() || cg.Public != c.Public.String() || cg.Core != c.Core.String() {
		t.Errorf("status impairments %+v, want wwan0 nat64 %s and cgnat %s -> %s, core %s", kinds, n.Prefix, c.Client4, c.Public, c.Core)
	}
	ns := l.Config().Namespaces
	wlan, _ := lab.Plan("wlan0")
	wwan, _ := lab.Plan("wwan0")
	srv := listenIn(t, ns.Internet, netip.AddrPortFrom(lab.Server4, 40099))
	core := listenIn(t, ns.Internet, netip.AddrPortFrom(c.Core, 40098))
	via := func(a netip.Addr, port uint16) netip.AddrPort {
		s, _ := probe.Embed4(n.Prefix, a)
		return netip.AddrPortFrom(s, port)
	}
	for _, k := range []struct {
		what string
		src  netip.Addr
		ln   net.Listener
		dst  netip.AddrPort
		want string
	}{
		{"wwan0 through the NAT64 to a server: the CGNAT's public address", wwan.Client6, srv, via(lab.Server4, 40099), c.Public.String()},
		{"wwan0 through the NAT64 to the core server: the translator's IPv4 side", wwan.Client6, core, via(c.Core, 40098), c.Client4.String()},
		{"wlan0 through wwan0's NAT64 prefix to the core server: unreachable", wlan.Client6, core, via(c.Core, 40098), ""},
		{"wlan0 to the core server: unreachable", wlan.Client4, core, netip.AddrPortFrom(c.Core, 40098), ""},
		{"wlan0 to a server: its own address", wlan.Client4, srv, netip.AddrPortFrom(lab.Server4, 40099), wlan.Client4.String()},
	} {
		if got := seenFrom(ns.Client, k.src, k.ln, k.dst); got != k.want {
			t.Errorf("%s: server saw %q, want %q", k.what, got, k.want)
		}
	}
	// Unsolicited inbound to the translator's IPv4 side: tayga's static
	// map would carry it to the client; the CGNAT stops it.
	cl := listenIn(t, ns.Client, netip.AddrPortFrom(wwan.Client6, 40097))
	if got := seenFrom(ns.Internet, lab.Server4, cl, netip.AddrPortFrom(c.Client4, 40097)); got != "" {
		t.Errorf("inbound connection to %s reached wwan0's client (from %s)", c.Client4, got)
	}
}
