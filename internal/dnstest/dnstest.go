// Package dnstest starts real miekg/dns servers on loopback for tests (the
// blackbox_exporter way: a real server, not a mock resolver).
package dnstest

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Serve serves h on 127.0.0.1, UDP and TCP on the same port (truncated UDP
// answers are retried over TCP), until the test ends.
func Serve(t testing.TB, h dns.Handler) netip.AddrPort {
	t.Helper()
	// The kernel picks a free UDP port; its TCP twin may be taken by
	// another process (tests run in parallel), so try a few.
	var (
		pc   net.PacketConn
		ln   net.Listener
		port int
		err  error
	)
	for try := 0; ; try++ {
		if pc, err = net.ListenPacket("udp4", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		raiseReceiveBuffer(pc)
		port = pc.LocalAddr().(*net.UDPAddr).Port
		if ln, err = net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			break
		}
		pc.Close()
		if try == 20 {
			t.Fatal(err)
		}
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

// Zone answers from maps keyed by lower-case FQDN ("name.test."). CNAME
// chains are followed within the zone; a name with no record and no CNAME
// is NXDOMAIN; a known name without records of the asked type is NOERROR
// with no answer. UDP answers are truncated to the client's EDNS0 size (512
// without EDNS0), so large answers exercise the TCP fallback.
type Zone struct {
	A, AAAA map[string][]string
	CNAME   map[string]string
	Rcode   map[string]int           // answered with this rcode
	Hang    map[string]bool          // never answered
	Gate    map[string]chan struct{} // answered once the channel is closed
	Delay   map[string]time.Duration // answered after this long
}

func (z *Zone) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	if z.Hang[name] {
		return
	}
	if g, ok := z.Gate[name]; ok {
		<-g
	}
	time.Sleep(z.Delay[name])
	m := new(dns.Msg)
	m.SetReply(req)
	if rc, ok := z.Rcode[name]; ok {
		m.Rcode = rc
		w.WriteMsg(m)
		return
	}
	for range 16 { // loop guard
		t, ok := z.CNAME[name]
		if !ok {
			break
		}
		m.Answer = append(m.Answer, &dns.CNAME{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 60}, Target: t})
		name = t
	}
	as, okA := z.A[name]
	as6, ok6 := z.AAAA[name]
	if !okA && !ok6 && len(m.Answer) == 0 {
		m.Rcode = dns.RcodeNameError
	}
	switch q.Qtype {
	case dns.TypeA:
		for _, a := range as {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP(a)})
		}
	case dns.TypeAAAA:
		for _, a := range as6 {
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: 60}, AAAA: net.ParseIP(a)})
		}
	}
	if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
		size := 512
		if o := req.IsEdns0(); o != nil {
			size = int(o.UDPSize())
		}
		m.Truncate(size)
	}
	w.WriteMsg(m)
}
