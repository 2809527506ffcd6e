package patterns

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/netip"
	"syscall"
	"time"

	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/probe"
)

// Causes a record names beside its status when a short probe after the
// test shows the network, not the server, is the reason. Each comes from
// what the probe measured, never from what the host is told.
const (
	// CauseUDPBlocked (with ":PORT"): a UDP transport's handshake failed on
	// its port while the same transport reached the same server on its
	// alternate port over the same path and family (000 §III: middleboxes
	// that treat UDP 443 specially).
	CauseUDPBlocked = "udp-blocked"
	// CauseUDPInterfered (with ":PORT"): a UDP transport connected on its
	// port, then stalled, while a ping over the same transport on its
	// alternate port ran to the end over the same path and family (a
	// middlebox that lets a flow's first packets through, 000 §III).
	CauseUDPInterfered = "udp-interfered"
	// CauseV6Blackhole: IPv6 to the server timed out on the path while
	// the same transport reached it over IPv4 on the same path.
	CauseV6Blackhole = "v6-blackhole"
	// CauseMPTCPStripped: MPTCP fell back to TCP on the primary path while
	// another path negotiated MPTCP with the same server: the server
	// offers it, something on the path removed the options (RFC 8684
	// §3.7).
	CauseMPTCPStripped = "mptcp-stripped"
	// CauseMPTCPNotOffered: no path negotiated MPTCP with the server.
	// (Every path stripping the options looks the same.)
	CauseMPTCPNotOffered = "mptcp-not-offered"
	// CausePortal: a plain HTTP request to the server's address on port
	// 80 over the path was answered by a redirect to another host or 511
	// Network Authentication Required (RFC 6585 §6): a captive portal
	// holds the path, whatever the test's own failure looked like.
	CausePortal = "portal"
	// CausePMTUBlackhole: a TLS handshake over TCP that never completed
	// completes from the same path and family to the same server and port
	// when the connection's MSS is clamped to diagnoseMSS (so every
	// segment, the server's certificate flight too, is small): large
	// packets vanish on the path and no ICMP says so (RFC 4821 §1).
	CausePMTUBlackhole = "pmtu-blackhole"
)

// diagnoseMSS is the clamped MSS of the pmtu-blackhole check: IPv4's
// default (RFC 879), under any path MTU the lab or a real access network
// plants.
const diagnoseMSS = 536

// smallSegmentsTimeout bounds the clamped handshake: where large packets
// are the only trouble it completes in round trips, and a server that
// answers nothing (every failed TCP test asks) costs no more than this.
const smallSegmentsTimeout = time.Second

// diagnoseTimeout bounds each diagnostic handshake.
const diagnoseTimeout = 3 * time.Second

// diagnoser probes once per question and remembers the answer, so a
// blocked port costs one extra handshake per path, family and transport,
// not one per failed test.
type diagnoser struct {
	o    RunOptions
	sv   server
	seen map[string]bool
}

func newDiagnoser(o RunOptions, sv server) *diagnoser {
	return &diagnoser{o: o, sv: sv, seen: map[string]bool{}}
}

// cause names the network's part in how rec ended ("" when none is shown).
func (d *diagnoser) cause(ctx context.Context, t test, rec *Record) string {
	if rec.Invalid || ctx.Err() != nil || t.unresolved != nil {
		return ""
	}
	desc, err := transport.Get(t.transport)
	if err != nil {
		return ""
	}
	if rec.Status == StatusSuccess {
		if t.transport == "mptcp" {
			return d.mptcpCause(ctx, t, rec)
		}
		return ""
	}
	// A handshake that never completed: quic-go reports its handshake
	// timeout as a TLS error.
	// A portal may also answer in the server's place (a client that does
	// not verify the certificate meets its HTTP answers: protocol-error).
	switch rec.Status {
	case StatusConnectionTimeout, StatusTimeout, StatusUnreachable, StatusTLSError, StatusProtocolError:
	default:
		return ""
	}
	if d.portal(ctx, t.path, t.family) {
		return CausePortal
	}
	if rec.Status == StatusProtocolError {
		return ""
	}
	port := rec.Config.Server.Port()
	// The listener's transport over the primary path alone: quic-handover
	// is served by quic, and its handshake is quic's.
	lis, err := transport.Get(desc.Listener())
	if err != nil {
		lis = desc
	}
	if len(rec.Connections) > 0 {
		// Connected, then stalled.
		if desc.Network == "udp" && rec.Status == StatusTimeout {
			if alt := d.altPort(lis); alt != 0 && alt != port && d.pings(ctx, lis.Name, t, alt) {
				return fmt.Sprintf("%s:%d", CauseUDPInterfered, port)
			}
		}
		return ""
	}
	if desc.Network == "udp" {
		alt := d.altPort(lis)
		if alt != 0 && alt != port {
			if d.reaches(ctx, lis.Name, t, t.family, alt) {
				return fmt.Sprintf("%s:%d", CauseUDPBlocked, port)
			}
		}
	}
	if desc.Network == "tcp" && t.transport == "tcp" && d.smallSegments(ctx, t, port) {
		return CausePMTUBlackhole
	}
	if t.family == probe.Family6 {
		if d.reaches(ctx, lis.Name, t, probe.Family4, port) {
			return CauseV6Blackhole
		}
	}
	return ""
}

// altPort is the alternate port of a listener: RunOptions.AltPorts, else
// its default.
func (d *diagnoser) altPort(lis *transport.Descriptor) uint16 {
	if p, ok := d.o.AltPorts[lis.Name]; ok {
		return p
	}
	return lis.AltPort
}

// reaches reports whether transport name completes a handshake with the
// server from t's primary path alone, over family f, on port.
func (d *diagnoser) reaches(ctx context.Context, name string, t test, f probe.Family, port uint16) bool {
	key := fmt.Sprintf("%s %s %d %d", name, t.path.Name, f, port)
	if ok, done := d.seen[key]; done {
		return ok
	}
	ok := d.handshake(ctx, name, t, f, port)
	d.seen[key] = ok
	d.o.Logger.Info("diagnostic handshake", "transport", name, "path", t.path.Name, "family", int(f), "port", port, "ok", ok)
	return ok
}

// pings reports whether a short ping test over transport name runs to
// the end from t's primary path alone, over t's family, on port.
func (d *diagnoser) pings(ctx context.Context, name string, t test, port uint16) bool {
	key := fmt.Sprintf("ping %s %s %d %d", name, t.path.Name, t.family, port)
	if ok, done := d.seen[key]; done {
		return ok
	}
	ok := false
	ip, has := d.sv.addr(t.path, t.family)
	if tr, err := newTransport(d.o, d.sv, name, roles(d.o, t.path, nil), t.family); err == nil && has {
		cfg := TestConfig{Pattern: "ping", Transport: name, Path: t.path.Name, Family: int(t.family),
			Server: netip.AddrPortFrom(ip, port), Params: Params{PingCount: 5, PingGap: 20 * time.Millisecond},
			Timeout: diagnoseTimeout, ConnectTimeout: diagnoseTimeout}
		ok = RunTest(ctx, tr, cfg, nil, d.o.Logger).Status == StatusSuccess
	}
	d.seen[key] = ok
	d.o.Logger.Info("diagnostic ping", "transport", name, "path", t.path.Name, "family", int(t.family), "port", port, "ok", ok)
	return ok
}

func (d *diagnoser) handshake(ctx context.Context, name string, t test, f probe.Family, port uint16) bool {
	ip, ok := d.sv.addr(t.path, f)
	if !ok {
		return false
	}
	if _, ok := t.path.SourceAddr(f); !ok {
		return false
	}
	tr, err := newTransport(d.o, d.sv, name, roles(d.o, t.path, nil), f)
	if err != nil {
		return false
	}
	pat, err := Get(t.pattern)
	if err != nil {
		return false
	}
	hctx, cancel := context.WithTimeout(ctx, diagnoseTimeout)
	defer cancel()
	c, err := tr.Dial(hctx, netip.AddrPortFrom(ip, port), pat.Family())
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// mptcpCause: an MPTCP test that fell back to TCP. Another path that
// negotiates MPTCP with the same server shows the server offers it.
func (d *diagnoser) mptcpCause(ctx context.Context, t test, rec *Record) string {
	sum, ok := rec.Summary.(*transport.MPTCPSummary)
	if !ok || sum.Negotiated == nil || *sum.Negotiated {
		return ""
	}
	port := rec.Config.Server.Port()
	compared := 0
	for _, p := range d.o.Paths {
		if _, ok := d.sv.addr(p, t.family); !ok || p.Name == t.path.Name || d.sv.unresolved(p) != nil {
			continue
		}
		if _, ok := p.SourceAddr(t.family); !ok {
			continue
		}
		compared++
		key := fmt.Sprintf("mptcp %s %d %d", p.Name, t.family, port)
		neg, done := d.seen[key]
		if !done {
			neg = d.mptcpNegotiates(ctx, p, t.family, port)
			d.seen[key] = neg
			d.o.Logger.Info("diagnostic MPTCP handshake", "path", p.Name, "family", int(t.family), "port", port, "negotiated", neg)
		}
		if neg {
			return CauseMPTCPStripped
		}
	}
	if compared == 0 {
		return "" // one path: a stripping path looks like a server without MPTCP
	}
	return CauseMPTCPNotOffered
}

func (d *diagnoser) mptcpNegotiates(ctx context.Context, p probe.Path, f probe.Family, port uint16) bool {
	ip, ok := d.sv.addr(p, f)
	if !ok {
		return false
	}
	hctx, cancel := context.WithTimeout(ctx, diagnoseTimeout)
	defer cancel()
	c, err := probe.DialMPTCP(hctx, p, "tcp", netip.AddrPortFrom(ip, port).String())
	if err != nil {
		return false
	}
	c.Close()
	return c.Negotiated
}

// portal reports whether a captive portal answers plain HTTP on port 80
// of the server's address over path p and family f (once per path and
// family): 511, or a redirect whose Location names another host. The
// request is half-closed so a server that answers nothing (a sink) ends
// the check at once instead of at its deadline.
func (d *diagnoser) portal(ctx context.Context, p probe.Path, f probe.Family) bool {
	key := fmt.Sprintf("portal %s %d", p.Name, f)
	if ok, done := d.seen[key]; done {
		return ok
	}
	ok, detail := false, ""
	if ip, has := d.sv.addr(p, f); has {
		ok, detail = portalAnswers(ctx, p, netip.AddrPortFrom(ip, 80))
	}
	d.seen[key] = ok
	d.o.Logger.Info("diagnostic portal check", "path", p.Name, "family", int(f), "portal", ok, "answer", detail)
	return ok
}

// portalAnswers is probe.CheckPortal bounded by diagnoseTimeout.
func portalAnswers(ctx context.Context, p probe.Path, ap netip.AddrPort) (bool, string) {
	hctx, cancel := context.WithTimeout(ctx, diagnoseTimeout)
	defer cancel()
	return probe.CheckPortal(hctx, p, ap)
}

// smallSegments reports whether a TLS handshake with the server completes
// over t's path and family with the MSS clamped to diagnoseMSS while one
// with the usual MSS does not (once per path, family and port; the
// clamped one first, so a path where neither works costs one handshake).
func (d *diagnoser) smallSegments(ctx context.Context, t test, port uint16) bool {
	key := fmt.Sprintf("mss %s %d %d", t.path.Name, t.family, port)
	if ok, done := d.seen[key]; done {
		return ok
	}
	ok := false
	if ip, has := d.sv.addr(t.path, t.family); has {
		ap := netip.AddrPortFrom(ip, port)
		ok = tlsHandshakes(ctx, t.path, ap, diagnoseMSS, smallSegmentsTimeout) && !tlsHandshakes(ctx, t.path, ap, 0, diagnoseTimeout)
	}
	d.seen[key] = ok
	d.o.Logger.Info("diagnostic small-segment handshake", "path", t.path.Name, "family", int(t.family), "port", port, "mss", diagnoseMSS, "pmtu_blackhole", ok)
	return ok
}

// tlsHandshakes reports whether a TLS handshake with ap completes over p
// (mss > 0: with the MSS clamped). Only whether the server's flight
// arrives matters here, not who the server is: the certificate is not
// verified.
func tlsHandshakes(ctx context.Context, p probe.Path, ap netip.AddrPort, mss int, timeout time.Duration) bool {
	network := "tcp4"
	if ap.Addr().Is6() {
		network = "tcp6"
	}
	dl, err := p.Dialer(network, probe.FamilyOf(ap.Addr()))
	if err != nil {
		return false
	}
	if mss > 0 {
		ctl := dl.ControlContext
		dl.ControlContext = func(ctx context.Context, network, address string, c syscall.RawConn) error {
			if ctl != nil {
				if err := ctl(ctx, network, address, c); err != nil {
					return err
				}
			}
			return setMSS(c, mss)
		}
	}
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	raw, err := dl.DialContext(hctx, network, ap.String())
	if err != nil {
		return false
	}
	defer raw.Close()
	tc := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12})
	return tc.HandshakeContext(hctx) == nil
}
