package lab_test

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/labtest"
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
	listen := func(side string, addr netip.AddrPort) net.Listener {
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
	// seen dials dst from src inside namespace side and returns the source
	// address ln's side accepted ("" when the dial failed).
	seen := func(side string, src netip.Addr, ln net.Listener) string {
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
		err := lab.InNS(side, func() error {
			d := net.Dialer{Timeout: 1500 * time.Millisecond, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))}
			cn, err := d.Dial("tcp", ln.Addr().String())
			if err == nil {
				cn.Close()
			}
			return err
		})
		r := <-ch
		if err != nil || r.err != nil {
			return ""
		}
		return r.a
	}
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
