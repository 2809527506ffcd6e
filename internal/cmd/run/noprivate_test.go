package run

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"

	"github.com/mptester/mptester/patterns"
	"github.com/mptester/mptester/report"
)

// TestNoPrivateRefusedAtDial: with --no-private, a server name that the
// path's own DNS server answers with a loopback address (TTL 0, as a
// rebinding name would after a public answer to an earlier check), and a
// loopback literal, are refused by every transport at its dial on the
// path: each test ends target-refused naming the address, and the
// listeners on those ports see no connection and no datagram. With the
// prefix declared public (as the lab declares its Internet) the same run
// reaches the real server.
func TestNoPrivateRefusedAtDial(t *testing.T) {
	tl, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	port := tl.Addr().(*net.TCPAddr).Port
	ul, err := net.ListenPacket("udp4", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Skipf("udp port %d taken: %v", port, err)
	}
	defer ul.Close()
	var conns, datagrams atomic.Int32
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := ul.ReadFrom(buf); err != nil {
				return
			}
			datagrams.Add(1)
		}
	}()
	dnsAddr := rebindDNS(t)
	p := fmt.Sprint(port)
	for _, server := range []string{"rebind.mpt.test", "127.0.0.1"} {
		out, errOut, err := execute(t, nil, "--no-private", "--server", server, "--dns", "lo="+dnsAddr, "--paths", "lo", "--insecure",
			"--tcp-port", p, "--quic-port", p, "--mpquic-port", p, "--transports", "tcp,mptcp,quic,mpquic,quic-handover",
			"--patterns", "ping", "--ping-count", "2", "--pace", "0")
		if err == nil {
			t.Fatalf("%s: the run passed\n%s", server, errOut)
		}
		var doc report.Document
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("%s: %v\n%s", server, err, errOut)
		}
		if len(doc.Records) == 0 {
			t.Fatalf("%s: no records: %s", server, out)
		}
		for _, raw := range doc.Records {
			var rec patterns.Record
			if err := json.Unmarshal(raw, &rec); err != nil {
				t.Fatal(err)
			}
			if rec.Status != patterns.StatusTargetRefused || !strings.Contains(rec.Error, "127.0.0.1") {
				t.Errorf("%s: %s over %s: status %s (%s), want target-refused naming 127.0.0.1", server, rec.Config.Pattern, rec.Config.Transport, rec.Status, rec.Error)
			}
		}
	}
	if conns.Load() != 0 || datagrams.Load() != 0 {
		t.Fatalf("the refused address received %d connections and %d datagrams", conns.Load(), datagrams.Load())
	}

	// Declared public: the guard lets the real server be reached.
	tp, qp, pin := startServer(t, false)
	_, errOut, err := execute(t, nil, "--no-private", "--public-prefix", "127.0.0.0/8", "--server", "rebind.mpt.test", "--dns", "lo="+dnsAddr,
		"--paths", "lo", "--pin", pin, "--tcp-port", fmt.Sprint(tp), "--quic-port", fmt.Sprint(qp), "--transports", "tcp,quic",
		"--patterns", "ping", "--ping-count", "2", "--pace", "0")
	if err != nil {
		t.Fatalf("public prefix: %v\n%s", err, errOut)
	}
}

// rebindDNS is a DNS server on loopback that answers rebind.mpt.test with
// 127.0.0.1, TTL 0.
func rebindDNS(t *testing.T) string {
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		if q := req.Question[0]; q.Name == "rebind.mpt.test." && q.Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 0}, A: net.IPv4(127, 0, 0, 1)})
		}
		w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	return pc.LocalAddr().String()
}

// TestNoPrivateNAT64Discovered: on a path whose DNS server is a DNS64
// with a network-specific prefix (ipv4only.arpa answers under
// 2a00:64::/96, RFC 7050), an IPv6 server address under that prefix that
// embeds 10.0.0.1 is refused at the dial like 10.0.0.1 itself.
func TestNoPrivateNAT64Discovered(t *testing.T) {
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		if q := req.Question[0]; q.Name == "ipv4only.arpa." && q.Qtype == dns.TypeAAAA {
			for _, a := range []string{"2a00:64::c000:aa", "2a00:64::c000:ab"} {
				m.Answer = append(m.Answer, &dns.AAAA{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: 60}, AAAA: net.ParseIP(a)})
			}
		}
		w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	out, errOut, err := execute(t, nil, "--no-private", "--server", "[2a00:64::a00:1]:8443", "--dns", "lo="+pc.LocalAddr().String(), "--paths", "lo",
		"--family", "6", "--insecure", "--transports", "tcp", "--patterns", "ping", "--ping-count", "2", "--pace", "0")
	if err == nil {
		t.Fatalf("the run passed\n%s", errOut)
	}
	var doc report.Document
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Records) != 1 {
		t.Fatalf("%v: %s\n%s", err, out, errOut)
	}
	var rec patterns.Record
	if err := json.Unmarshal(doc.Records[0], &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Status != patterns.StatusTargetRefused || !strings.Contains(rec.Error, "2a00:64::a00:1") {
		t.Fatalf("status %s (%s), want target-refused", rec.Status, rec.Error)
	}
}
