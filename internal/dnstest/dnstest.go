// Package dnstest starts real miekg/dns servers on loopback for tests (the
// blackbox_exporter way: a real server, not a mock resolver).
package dnstest

import (
	"fmt"
	"net"
	"net/netip"
	"testing"

	"github.com/miekg/dns"
)

// Serve serves h on 127.0.0.1, UDP and TCP on the same port (truncated UDP
// answers are retried over TCP), until the test ends.
func Serve(t testing.TB, h dns.Handler) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := pc.LocalAddr().(*net.UDPAddr).Port
	ln, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		pc.Close()
		t.Fatal(err)
	}
	for _, s := range []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}} {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		go s.ActivateAndServe()
		<-started
		t.Cleanup(func() { s.Shutdown() })
	}
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))
}
