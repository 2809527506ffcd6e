package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/mptester/mptester/mpquic"
	"github.com/mptester/mptester/mpquic/h3"
	"github.com/mptester/mptester/probe"
)

// The mpquic transport: mptester's own QUIC v1 with the multipath extension
// (package mpquic, draft-ietf-quic-multipath-21). A connection
// starts on the primary path and opens one more path per other selected
// path (a socket bound to it through package probe), backup roles as
// PATH_STATUS_BACKUP; against a server without multipath it stays on the
// primary. The HTTP patterns speak HTTP/3 (package mpquic/h3, ALPN h3), as
// the quic transport's do over quic-go, so that the two are measured
// through the same framing; a server that predates it is still spoken to
// with HTTP/1.1 on QUIC streams (ALPN alpnH1Q), one exchange per stream.
const (
	nameMPQUIC = "mpquic"
	keyMPQUIC  = "mpquic"
	alpnH1Q    = "mptester-h1q/1"
	// mpquicSocketBuffer is the receive buffer asked for each socket.
	mpquicSocketBuffer = 8 << 20
)

func init() {
	Register(Descriptor{Name: nameMPQUIC, Help: "mptester's own multipath QUIC (mpquic), HTTP/3 for the HTTP patterns", Order: 35,
		// Like quic: the counters count whole UDP payloads, acks included.
		// Handover: a backup path keeps the connection across the loss
		// of the others (mobile mode runs mpquic next to mptcp).
		Network: "udp", DefaultPort: 4433, HeaderOverhead: 0.04, Multipath: true, Handover: true,
		New:    func(o Options) (Transport, error) { return &mpquicTransport{o: o}, nil },
		Listen: listenMPQUIC})
}

type mpquicTransport struct{ o Options }

func (t *mpquicTransport) Name() string { return nameMPQUIC }

func mpquicConfig(idle time.Duration, qlogDir string, cc mpquic.CongestionControl) *mpquic.Config {
	// Streams queue at most UnsentLimit, like TCP senders (LimitUnsent).
	return &mpquic.Config{MaxIdleTimeout: idle, KeepAlivePeriod: idle / 3, SendBuffer: UnsentLimit,
		Qlog: mpquicQlog(qlogDir), Congestion: cc,
		StreamReceiveWindow: 16 << 20, ConnectionReceiveWindow: 32 << 20,
		MaxDatagramSize: QUICStartDatagram, // mpquic's 1252 does not fit IPv6's 1280
		// HTTP/3's control and QPACK streams (RFC 9114 §6.2), with room.
		MaxIncomingUniStreams: 8,
		// The same floor as quic-handover's failure rule: one starved PTO
		// on a ~20 ms path is not a failed path.
		MinFailureTimeout: DefaultHandover.MinTimeout,
		// A client starts in v1 and offers v2 (RFC 9368): a server that
		// speaks it moves the connection there, one that does not keeps
		// v1 at no cost; results record which (Info.QUICVersion).
		Versions: []uint32{mpquic.Version2, mpquic.Version1}}
}

// mpquicStatus says what package mpquic's errors mean.
func mpquicStatus(err error) Status {
	var (
		peer   *mpquic.PeerCloseError
		local  *mpquic.TransportError
		app    *mpquic.ApplicationCloseError
		stream *mpquic.StreamError
	)
	switch {
	case errors.Is(err, mpquic.ErrHandshakeTimeout):
		return StatusConnectionTimeout
	case errors.Is(err, mpquic.ErrIdleTimeout):
		return StatusTimeout
	case errors.Is(err, mpquic.ErrVersionNegotiation):
		return StatusUnsupported
	case errors.Is(err, mpquic.ErrStatelessReset):
		return StatusConnectionReset // the server lost the connection (a restart)
	case errors.As(err, &peer):
		if peer.Err.Code >= 0x100 && peer.Err.Code < 0x200 {
			return StatusTLSError // CRYPTO_ERROR: a TLS alert (RFC 9001 §4.8)
		}
		return StatusConnectionReset
	case errors.As(err, &app):
		if app.Remote && app.Code == quicCodeRefused {
			return StatusServerRefused
		}
		return StatusConnectionClosed
	case errors.As(err, &stream):
		return StatusConnectionClosed
	case errors.As(err, &local):
		if local.Code >= 0x100 && local.Code < 0x200 {
			return StatusTLSError
		}
		return StatusProtocolError
	}
	return ""
}

func mpquicSetupStatus(err error) Status {
	if errors.Is(err, mpquic.ErrIdleTimeout) {
		return StatusConnectionTimeout
	}
	return mpquicStatus(err)
}

func (t *mpquicTransport) Dial(ctx context.Context, addr netip.AddrPort, family string) (Conn, error) {
	start := time.Now()
	f := probe.Family4
	if addr.Addr().Unmap().Is6() {
		f = probe.Family6
	}
	if err := probe.CheckTarget(ctx, t.o.Primary(), addr.Addr()); err != nil {
		return nil, wrap(opConnect, err, nil)
	}
	udp, err := probe.ListenUDP(ctx, t.o.Primary(), f)
	if err != nil {
		return nil, wrap(opConnect, fmt.Errorf("mpquic socket: %w", err), nil)
	}
	// A window of datagrams can arrive while the connection goroutine is
	// busy: the default ~200 KiB buffer drops them (and the path's bytes
	// then exceed the connection's counters).
	probe.RaiseReceiveBuffer(udp, mpquicSocketBuffer)
	cfg := t.o.TLS.Clone()
	cfg.NextProtos = offered(family, []string{h3.ALPN, alpnH1Q})
	remote := net.UDPAddrFromAddrPort(addr)
	mcfg := mpquicConfig(t.o.IdleTimeout, t.o.QlogDir, t.o.MPQUICCongestion)
	c, err := mpquic.Dial(ctx, udp, remote, cfg, mcfg)
	if err != nil {
		udp.Close()
		return nil, wrap(opQUICHandshake, err, mpquicSetupStatus)
	}
	mc := &mpquicConn{c: c, udp: udp, names: map[uint32]string{0: t.o.Primary().Name}, info: Info{Transport: nameMPQUIC, Local: c.LocalAddr().String(),
		Remote: c.RemoteAddr().String(), ALPN: c.ConnectionState().NegotiatedProtocol, QUICVersion: quicVersionName(c.Version()), Setup: time.Since(start)}}
	mc.info.Facts = mc.addPaths(ctx, t.o.Paths[1:], f, remote)
	return mc, nil
}

// mpquicPathTimeout bounds opening (validating) one more path: a path that
// does not answer by then is left out, as MPTCP leaves out a subflow.
const mpquicPathTimeout = 3 * time.Second

// addPaths opens a path over each other selected path; what it could not
// open is in the fact, the connection goes on without it.
func (c *mpquicConn) addPaths(ctx context.Context, others []PathRole, f probe.Family, remote *net.UDPAddr) *MPQUICStatus {
	st := &MPQUICStatus{Multipath: c.c.Multipath(), Paths: 1}
	if !st.Multipath || len(others) == 0 {
		return st
	}
	for _, p := range others {
		if err := probe.CheckTarget(ctx, p.Path, remote.AddrPort().Addr()); err != nil {
			st.Errors = append(st.Errors, fmt.Sprintf("%s: %v", p.Name, err))
			continue
		}
		udp, err := probe.ListenUDP(ctx, p.Path, f)
		if err != nil {
			st.Errors = append(st.Errors, fmt.Sprintf("%s: %v", p.Name, err))
			continue
		}
		probe.RaiseReceiveBuffer(udp, mpquicSocketBuffer)
		status := mpquic.PathAvailable
		if p.Role == RoleBackup {
			status = mpquic.PathBackup
		}
		pctx, cancel := context.WithTimeout(ctx, mpquicPathTimeout)
		h, err := c.c.AddPathStatus(pctx, udp, remote, status)
		cancel()
		if err != nil {
			udp.Close()
			st.Errors = append(st.Errors, fmt.Sprintf("%s: %v", p.Name, err))
			continue
		}
		c.mu.Lock()
		c.extra = append(c.extra, udp)
		c.names[h.ID()] = p.Name
		c.mu.Unlock()
		st.Paths++
	}
	return st
}

// MPQUICStatus is the connection's fact: whether the server negotiated
// multipath and how many paths were opened.
type MPQUICStatus struct {
	Multipath bool     `json:"multipath"`
	Paths     int      `json:"paths"`
	Errors    []string `json:"path_errors,omitempty"`
}

// Key of the fact.
func (*MPQUICStatus) Key() string { return keyMPQUIC }

type mpquicConn struct {
	c     *mpquic.Conn
	udp   *net.UDPConn
	info  Info
	mu    sync.Mutex
	rt    *http.Transport   // HTTP/1.1 on streams (ALPN alpnH1Q)
	h3    *h3.ClientConn    // HTTP/3 (ALPN h3)
	extra []*net.UDPConn    // the other paths' sockets
	names map[uint32]string // path ID → selected path name
}

func (c *mpquicConn) OpenStream(ctx context.Context) (Stream, error) {
	s, err := c.c.OpenStream(ctx)
	if err != nil {
		return nil, wrap("open stream", err, mpquicStatus)
	}
	return classified{Stream: mpquicStream{s}, own: mpquicStatus}, nil
}

func (c *mpquicConn) MultiStream() bool { return true }

// RoundTripper carries HTTP/3, or HTTP/1.1 on this connection's streams
// with a server that chose alpnH1Q: each request opens a stream, so
// requests never wait for one another.
func (c *mpquicConn) RoundTripper() http.RoundTripper {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.info.ALPN == h3.ALPN {
		if c.h3 == nil {
			cc, err := h3.NewClientConn(c.c)
			if err != nil {
				return failingRT{wrap(opHTTP, err, mpquicStatus)}
			}
			c.h3 = cc
		}
		return classifiedRT{rt: c.h3, own: mpquicStatus}
	}
	if c.rt == nil {
		// The stream is already under QUIC's TLS: an https URL must not
		// start another handshake, so DialTLSContext gives the stream too.
		dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
			s, err := c.c.OpenStream(ctx)
			if err != nil {
				return nil, wrap(opHTTP, err, mpquicStatus)
			}
			return streamConn{s, c.c}, nil
		}
		c.rt = &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 16, DialContext: dial, DialTLSContext: dial}
	}
	return classifiedRT{rt: c.rt, own: mpquicStatus}
}

// streamConn is a QUIC stream as the net.Conn net/http wants; Close ends
// both directions.
type streamConn struct {
	*mpquic.Stream
	c *mpquic.Conn
}

func (s streamConn) Close() error {
	s.Stream.CancelRead(0)
	return s.Stream.CloseWrite()
}
func (s streamConn) LocalAddr() net.Addr  { return s.c.LocalAddr() }
func (s streamConn) RemoteAddr() net.Addr { return s.c.RemoteAddr() }

// streamListener hands net/http each stream the peer opens.
type streamListener struct {
	c    *mpquic.Conn
	ctx  context.Context
	stop context.CancelFunc
}

func (l streamListener) Accept() (net.Conn, error) {
	s, err := l.c.AcceptStream(l.ctx)
	if err != nil {
		return nil, err
	}
	return streamConn{s, l.c}, nil
}
func (l streamListener) Close() error   { l.stop(); return nil }
func (l streamListener) Addr() net.Addr { return l.c.LocalAddr() }

func (c *mpquicConn) Info() Info { return c.info }

func (c *mpquicConn) Sample() State {
	c.mu.Lock()
	names := maps.Clone(c.names)
	c.mu.Unlock()
	return sampleMPQUIC(c.c, names)
}

func (c *mpquicConn) Close() error {
	c.mu.Lock()
	if c.rt != nil {
		c.rt.CloseIdleConnections()
	}
	if c.h3 != nil {
		c.h3.Close()
	}
	c.mu.Unlock()
	err := c.c.CloseWithError(0, "")
	c.udp.Close()
	c.mu.Lock()
	for _, u := range c.extra {
		u.Close()
	}
	c.mu.Unlock()
	return err
}

// mpquicStream: Close also stops reading, like quicStream.
type mpquicStream struct{ *mpquic.Stream }

func (s mpquicStream) Close() error {
	s.Stream.CancelRead(0)
	return s.Stream.CloseWrite()
}

// MPQUICState is one sample of an mpquic connection: the connection's
// counters (path 0's RTT, windows and packets summed) and each path's
// state and counters (the per-path samples: RTT, cwnd, bytes in
// flight, packets sent and lost, status).
type MPQUICState struct {
	QUICStats
	Paths []MPQUICPath `json:"paths"`
}

// MPQUICPath is one path in a sample.
type MPQUICPath struct {
	PathState
	ID                uint32 `json:"path_id"`
	CongestionWindow  uint64 `json:"congestion_window"`
	PacketsSent       uint64 `json:"packets_sent"`
	PacketsLost       uint64 `json:"packets_lost"`
	Validated         bool   `json:"validated"`
	Abandoned         bool   `json:"abandoned"`
	PotentiallyFailed bool   `json:"potentially_failed"`
	MaxDatagramSize   int    `json:"max_datagram_size"` // after path MTU discovery
	// ECN is the path's ECN validation (RFC 9000 §13.4.2): validated,
	// bleached, mangled, not-tried (not marked: disabled or not Linux) or
	// testing (no marked packet acknowledged yet). CESent counts the CE
	// marks the peer reported on the packets this side sent on the path
	// (each one a congestion signal once validated), CEReceived the
	// CE-marked packets that arrived on it. ECTUnreported counts the
	// ECT(0) packets sent whose arrival the peer has not reported yet
	// (ACK-only packets are acknowledged late or never): CE marks on
	// them are missing from CESent.
	ECN           string `json:"ecn"`
	CESent        uint64 `json:"ce_sent"`
	CEReceived    uint64 `json:"ce_received"`
	ECTUnreported uint64 `json:"ect_unreported"`
}

// PathStates implements PathStater.
func (s *MPQUICState) PathStates() []PathState {
	out := make([]PathState, 0, len(s.Paths))
	for _, p := range s.Paths {
		out = append(out, p.PathState)
	}
	return out
}

// PerPath implements PathSampler: the UDP payload bytes each path carried
// (acks included, as the connection's counters).
func (s *MPQUICState) PerPath() []PathCounters {
	out := make([]PathCounters, 0, len(s.Paths))
	for _, p := range s.Paths {
		out = append(out, PathCounters{Path: p.Path, Local: p.Local, Remote: p.Remote, Sent: p.Sent, Received: p.Received})
	}
	return out
}

func addrPort(a net.Addr) netip.AddrPort {
	if u, ok := a.(*net.UDPAddr); ok {
		return u.AddrPort()
	}
	return netip.AddrPort{}
}

func sampleMPQUIC(c *mpquic.Conn, names map[uint32]string) State {
	// Paths first: the counters only grow, so the connection's totals,
	// read after, are never below the paths' sum (a packet arriving
	// between the two reads made it so).
	paths := c.PathStats()
	s := c.Stats()
	st := &MPQUICState{QUICStats: QUICStats{MinRTT: s.MinRTT, LatestRTT: s.LatestRTT, SmoothedRTT: s.SmoothedRTT,
		MeanDeviation: s.RTTVar, CongestionWindow: uint64(s.CongestionWindow), BytesSent: s.BytesSent,
		PacketsSent: s.PacketsSent, BytesReceived: s.BytesReceived, PacketsLost: s.PacketsLost}, Paths: []MPQUICPath{}}
	usable := func(p mpquic.PathStats) bool { return p.Validated && !p.Abandoned && !p.PotentiallyFailed }
	// The scheduler sends on a backup path only while no available path
	// is usable: until then the backup is in standby (its acks and
	// keep-alives are not data), as mobile mode reads a quic-handover
	// standby path.
	availableUsable := slices.ContainsFunc(paths, func(p mpquic.PathStats) bool { return p.Status != mpquic.PathBackup && usable(p) })
	for _, p := range paths {
		active := usable(p) && (p.Status != mpquic.PathBackup || !availableUsable)
		st.Paths = append(st.Paths, MPQUICPath{PathState: PathState{Path: names[p.ID], Local: addrPort(p.LocalAddr), Remote: addrPort(p.RemoteAddr),
			Backup: p.Status == mpquic.PathBackup, Active: active,
			SRTT: p.SmoothedRTT, RTO: p.PTO, RTOs: uint32(p.PTOBackoff),
			InFlight: uint64(p.BytesInFlight), Sent: p.BytesSent, Received: p.BytesReceived},
			ID: p.ID, CongestionWindow: uint64(p.CongestionWindow), PacketsSent: p.PacketsSent, PacketsLost: p.PacketsLost,
			Validated: p.Validated, Abandoned: p.Abandoned, PotentiallyFailed: p.PotentiallyFailed, MaxDatagramSize: p.MaxDatagramSize,
			ECN: p.ECN.String(), CESent: p.ECNCE, CEReceived: p.ECNCEReceived, ECTUnreported: p.ECNUnreported})
	}
	return State{Key: keyMPQUIC, Data: st}
}

type mpquicListener struct {
	udp net.PacketConn
	ln  *mpquic.Listener
	o   ListenOptions
}

func listenMPQUIC(ctx context.Context, o ListenOptions) (Listener, error) {
	pc, _ := o.Socket.(net.PacketConn)
	if pc == nil {
		ua, err := net.ResolveUDPAddr("udp", o.Addr)
		if err != nil {
			return nil, fmt.Errorf("mpquic address %s: %w", o.Addr, err)
		}
		if pc, err = net.ListenUDP("udp", ua); err != nil {
			return nil, fmt.Errorf("listen udp %s: %w", o.Addr, err)
		}
	}
	if sc, ok := pc.(syscall.Conn); ok {
		probe.RaiseReceiveBuffer(sc, mpquicSocketBuffer)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{o.Certificate}, MinVersion: tls.VersionTLS13, NextProtos: append([]string{h3.ALPN, alpnH1Q, alpnHQ}, o.StreamALPNs...)}
	mcfg := mpquicConfig(o.IdleTimeout, o.QlogDir, o.MPQUICCongestion)
	mcfg.RequireRetry = o.MPQUICRetry
	ln, err := mpquic.Listen(pc, cfg, mcfg)
	if err != nil {
		pc.Close()
		return nil, fmt.Errorf("listen mpquic %s: %w", pc.LocalAddr(), err)
	}
	return &mpquicListener{udp: pc, ln: ln, o: o}, nil
}

func (l *mpquicListener) Addr() net.Addr { return l.ln.Addr() }

func (l *mpquicListener) Describe() string {
	return "HTTP/3 (or HTTP/1.1 on streams, or hq-interop), stream patterns"
}

func (l *mpquicListener) Accept(ctx context.Context) (ServerConn, error) {
	c, err := l.ln.Accept(ctx)
	if err != nil {
		return nil, err
	}
	return &mpquicServerConn{l: l, c: c}, nil
}

func (l *mpquicListener) Shutdown(context.Context) error {
	l.logStats()
	return l.ln.Close()
}

func (l *mpquicListener) Close() error {
	l.logStats()
	l.ln.Close()
	return l.udp.Close()
}

// logStats says what the listener did with Initials that found no
// connection (what a flood of them cost it).
func (l *mpquicListener) logStats() {
	if l.o.Logger == nil {
		return
	}
	s := l.ln.Stats()
	l.o.Logger.Info("mpquic listener", "addr", l.ln.Addr().String(), "half_open", s.HalfOpen, "undecryptable_initials", s.Undecryptable,
		"retries_sent", s.RetriesSent, "bad_tokens", s.BadTokens, "refused_at_cap", s.Refused)
}

type mpquicServerConn struct {
	l *mpquicListener
	c *mpquic.Conn
}

func (c *mpquicServerConn) RemoteAddr() net.Addr { return c.c.RemoteAddr() }

func (c *mpquicServerConn) Refuse(reason string) { _ = c.c.CloseWithError(quicCodeRefused, reason) }

// Handshake: the listener returns connections with the handshake done.
func (c *mpquicServerConn) Handshake(context.Context) (string, bool, error) {
	alpn := c.c.ConnectionState().NegotiatedProtocol
	return alpn, alpn == h3.ALPN || alpn == alpnH1Q || alpn == alpnHQ, nil
}

// ServeHTTP serves HTTP/3, or HTTP/1.1 on every stream, until the
// connection ends.
func (c *mpquicServerConn) ServeHTTP() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	o := c.l.o
	switch c.c.ConnectionState().NegotiatedProtocol {
	case h3.ALPN:
		_ = (&h3.Server{Handler: o.HTTP, ReadHeaderTimeout: o.ReadTimeout}).ServeConn(ctx, c.c)
		return
	case alpnHQ:
		serveHQ(ctx, c.c, o.HTTP, o.ReadTimeout)
		return
	}
	srv := &http.Server{Handler: o.HTTP, ReadHeaderTimeout: o.ReadTimeout, IdleTimeout: o.IdleTimeout}
	if o.Logger != nil {
		srv.ErrorLog = slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug)
	}
	_ = srv.Serve(streamListener{c: c.c, ctx: ctx, stop: stop})
}

func (c *mpquicServerConn) AcceptStream(ctx context.Context) (Stream, error) {
	s, err := c.c.AcceptStream(ctx)
	if err != nil {
		return nil, err
	}
	return classified{Stream: mpquicStream{s}, own: mpquicStatus}, nil
}

func (c *mpquicServerConn) Sample() State { return sampleMPQUIC(c.c, nil) }

func (c *mpquicServerConn) Abort(code uint64, reason string) { _ = c.c.CloseWithError(code, reason) }

func (c *mpquicServerConn) Close() error { return c.c.CloseWithError(0, "") }

// failingRT answers every request with err (HTTP/3 could not start on the
// connection).
type failingRT struct{ err error }

func (f failingRT) RoundTrip(*http.Request) (*http.Response, error) { return nil, f.err }
