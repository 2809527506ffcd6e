package patterns

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"golang.org/x/net/http2"

	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/patterns/wire"
)

// ServerConfig of `mptester serve`.
type ServerConfig struct {
	// Certificate served on every listener.
	Certificate tls.Certificate
	// TCPAddr is host:port of the TLS/TCP listener ("" disables it).
	TCPAddr string
	// QUICAddrs are the UDP listeners (000 §III: 443 and 6121).
	QUICAddrs []string
	// NoMPTCP disables the MPTCP-enabled TCP listener (plain TCP only).
	NoMPTCP bool
	// TCPListener and QUICConns, when set, are used instead of binding
	// TCPAddr and QUICAddrs (sockets opened elsewhere, e.g. in a lab's
	// network namespace). The server closes them.
	TCPListener net.Listener
	QUICConns   []net.PacketConn
	Limits      Limits
	Logger      *slog.Logger
}

// Server serves every registered pattern over TLS/TCP (HTTP/1.1, HTTP/2 and
// stream ALPNs) and QUIC (HTTP/3 and stream ALPNs).
type Server struct {
	cfg  ServerConfig
	mux  *Mux
	log  *slog.Logger
	lim  *limiter
	hs   *limiter // the TLS handshake stage: no session slot until it ends
	http *http.Server
	h3   *http3.Server
	hl   *chanListener

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	tcpLn   net.Listener
	quicTrs []*quic.Transport
	quicLns []*quic.Listener

	mu       sync.Mutex
	tcpConns map[net.Conn]func() // open TCP sessions and their release
}

// streamFrameLimit: the largest frame a client may send (data/chunk).
const streamFrameLimit = max(dataFrameLen, wire.MaxChunk) + 64

// NewServer builds a server; Start binds it.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Limits == (Limits{}) {
		cfg.Limits = DefaultLimits()
	}
	if cfg.TCPAddr == "" && len(cfg.QUICAddrs) == 0 && cfg.TCPListener == nil && len(cfg.QUICConns) == 0 {
		return nil, errors.New("serve: no listener configured")
	}
	m := &Mux{HTTP: http.NewServeMux(), Streams: map[wire.Kind]StreamHandler{}, Families: map[wire.Kind]string{},
		Limits: cfg.Limits, Logger: cfg.Logger}
	for _, n := range Names() {
		p, _ := Get(n)
		p.Register(m)
	}
	s := &Server{cfg: cfg, mux: m, log: cfg.Logger, lim: newLimiter(cfg.Limits), hs: newLimiter(handshakeLimits(cfg.Limits)),
		tcpConns: map[net.Conn]func(){}}
	return s, nil
}

func (s *Server) tlsConfig(protos ...string) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{s.cfg.Certificate}, NextProtos: protos, MinVersion: tls.VersionTLS12}
}

// Start binds every listener and serves until Shutdown.
func (s *Server) Start(ctx context.Context) error {
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	lim := s.cfg.Limits
	if s.cfg.TCPAddr != "" || s.cfg.TCPListener != nil {
		ln := s.cfg.TCPListener
		if ln == nil {
			var lc net.ListenConfig
			// The standard library's MPTCP listener accepts plain TCP too.
			lc.SetMultipathTCP(!s.cfg.NoMPTCP)
			var err error
			if ln, err = lc.Listen(ctx, "tcp", s.cfg.TCPAddr); err != nil {
				return fmt.Errorf("listen tcp %s: %w", s.cfg.TCPAddr, err)
			}
		}
		s.tcpLn = ln
		s.hl = newChanListener(ln.Addr())
		s.http = &http.Server{Handler: s.mux.HTTP, ReadHeaderTimeout: lim.ReadTimeout, IdleTimeout: lim.IdleTimeout,
			ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug), ConnState: s.httpConnState,
			Protocols: new(http.Protocols)}
		s.http.Protocols.SetHTTP1(true)
		s.http.Protocols.SetHTTP2(true)
		s.wg.Add(2)
		go func() { defer s.wg.Done(); _ = s.http.Serve(s.hl) }()
		go func() { defer s.wg.Done(); s.acceptTCP() }()
		s.log.Info("listening", "transport", "tcp", "addr", ln.Addr().String(), "mptcp", !s.cfg.NoMPTCP)
	}
	s.h3 = &http3.Server{Handler: s.mux.HTTP, IdleTimeout: lim.IdleTimeout, Logger: s.log}
	pcs := slices.Clone(s.cfg.QUICConns)
	for _, a := range s.cfg.QUICAddrs {
		ua, err := net.ResolveUDPAddr("udp", a)
		if err != nil {
			s.closeListeners()
			return fmt.Errorf("quic address %s: %w", a, err)
		}
		// An unconnected wildcard socket: quic-go reads the destination
		// address of each packet (IP_PKTINFO) and replies from it, so a
		// multi-homed server answers from the address the client reached.
		udp, err := net.ListenUDP("udp", ua)
		if err != nil {
			s.closeListeners()
			return fmt.Errorf("listen udp %s: %w", a, err)
		}
		pcs = append(pcs, udp)
	}
	for _, udp := range pcs {
		tr := &quic.Transport{Conn: udp}
		ln, err := tr.Listen(s.tlsConfig(wire.ALPNHTTP3, wire.ALPNIperf, wire.ALPNInteractive), transport.QUICConfig(lim.IdleTimeout))
		if err != nil {
			tr.Close()
			s.closeListeners()
			return fmt.Errorf("listen quic %s: %w", udp.LocalAddr(), err)
		}
		s.quicTrs, s.quicLns = append(s.quicTrs, tr), append(s.quicLns, ln)
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.acceptQUIC(ln) }()
		s.log.Info("listening", "transport", "quic", "addr", ln.Addr().String())
	}
	return nil
}

// TCPAddr is the bound TCP address (nil when disabled).
func (s *Server) TCPAddr() net.Addr {
	if s.tcpLn == nil {
		return nil
	}
	return s.tcpLn.Addr()
}

// QUICAddrs are the bound UDP addresses.
func (s *Server) QUICAddrs() []net.Addr {
	out := []net.Addr{}
	for _, ln := range s.quicLns {
		out = append(out, ln.Addr())
	}
	return out
}

func (s *Server) closeListeners() {
	if s.tcpLn != nil {
		s.tcpLn.Close()
	}
	for _, ln := range s.quicLns {
		ln.Close()
	}
}

// Shutdown stops accepting, lets running sessions finish until ctx ends,
// then closes everything.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closeListeners()
	if s.hl != nil {
		s.hl.Close()
	}
	var errs []error
	if s.http != nil {
		errs = append(errs, s.http.Shutdown(ctx))
	}
	if s.h3 != nil {
		errs = append(errs, s.h3.Shutdown(ctx))
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, ctx.Err())
	}
	s.Close()
	return errors.Join(errs...)
}

// Close stops everything at once (as if killed): stream sessions see their
// context cancelled and every socket is closed.
func (s *Server) Close() {
	if s.cancel != nil {
		s.cancel()
	}
	s.closeListeners()
	if s.http != nil {
		s.http.Close()
	}
	if s.h3 != nil {
		s.h3.Close()
	}
	s.mu.Lock()
	for c := range s.tcpConns {
		c.Close()
	}
	s.mu.Unlock()
	for _, tr := range s.quicTrs {
		tr.Close()
		tr.Conn.Close()
	}
}

func remoteIP(a net.Addr) netip.Addr {
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

func (s *Server) trackTCP(c net.Conn, release func()) {
	s.mu.Lock()
	s.tcpConns[c] = release
	s.mu.Unlock()
}

// untrackTCP releases a session once.
func (s *Server) untrackTCP(c net.Conn) {
	s.mu.Lock()
	rel, ok := s.tcpConns[c]
	delete(s.tcpConns, c)
	s.mu.Unlock()
	if ok {
		rel()
	}
}

func (s *Server) httpConnState(c net.Conn, st http.ConnState) {
	if st == http.StateClosed || st == http.StateHijacked {
		s.untrackTCP(c)
	}
}

func (s *Server) acceptTCP() {
	for {
		c, err := s.tcpLn.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.log.Warn("accept", "err", err)
			}
			return
		}
		ip := remoteIP(c.RemoteAddr())
		// Connections that never finish their handshake hold a place in
		// the handshake stage (bounded, short timeout), never a session.
		hsRelease, reason := s.hs.acquire(ip)
		if hsRelease == nil {
			s.log.Info("handshake refused", "client", c.RemoteAddr().String(), "reason", reason)
			c.Close()
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveTCP(c, hsRelease)
		}()
	}
}

func (s *Server) serveTCP(raw net.Conn, hsRelease func()) {
	tc := tls.Server(raw, s.tlsConfig(wire.ALPNHTTP2, wire.ALPNHTTP1, wire.ALPNIperf, wire.ALPNInteractive))
	s.trackTCP(tc, hsRelease)
	hto := s.cfg.Limits.handshakeTimeout()
	_ = raw.SetDeadline(time.Now().Add(hto))
	ctx, cancel := context.WithTimeout(s.ctx, hto)
	err := tc.HandshakeContext(ctx)
	cancel()
	s.untrackTCP(tc) // leaves the handshake stage
	if err != nil {
		s.log.Info("session closed", "client", raw.RemoteAddr().String(), "reason", "tls handshake: "+err.Error())
		tc.Close()
		return
	}
	release, reason := s.lim.acquire(remoteIP(raw.RemoteAddr()))
	if release == nil {
		s.log.Info("session refused", "client", raw.RemoteAddr().String(), "reason", reason)
		refuseTCP(tc, reason)
		return
	}
	s.trackTCP(tc, release)
	_ = raw.SetDeadline(time.Time{})
	switch alpn := tc.ConnectionState().NegotiatedProtocol; alpn {
	case wire.ALPNIperf, wire.ALPNInteractive:
		transport.LimitUnsent(raw)
		s.serveStream(withConnSampler(s.ctx, transport.AcceptedSampler(raw)), tc, alpn, raw.RemoteAddr(), nil)
		tc.Close()
		s.untrackTCP(tc)
	default: // h2, http/1.1, or no ALPN (plain HTTPS clients such as curl)
		if !s.hl.push(tc) {
			tc.Close()
			s.untrackTCP(tc)
		}
	}
}

func (s *Server) acceptQUIC(ln *quic.Listener) {
	for {
		c, err := ln.Accept(s.ctx)
		if err != nil {
			return
		}
		release, reason := s.lim.acquire(remoteIP(c.RemoteAddr()))
		if release == nil {
			s.log.Info("session refused", "client", c.RemoteAddr().String(), "reason", reason)
			_ = c.CloseWithError(quic.ApplicationErrorCode(wire.CodeBusy), reason)
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer release()
			s.serveQUIC(c)
		}()
	}
}

func (s *Server) serveQUIC(c *quic.Conn) {
	alpn := c.ConnectionState().TLS.NegotiatedProtocol
	if alpn == wire.ALPNHTTP3 {
		_ = s.h3.ServeQUICConn(c)
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		st, err := c.AcceptStream(s.ctx)
		if err != nil {
			if s.ctx.Err() != nil {
				_ = c.CloseWithError(quic.ApplicationErrorCode(wire.CodeShutdown), "server stopping")
			}
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := withConnSampler(s.ctx, func() transport.State { return transport.SampleQUIC(c) })
			s.serveStream(ctx, transport.WrapQUICStream(st), alpn, c.RemoteAddr(), c)
		}()
	}
}

// connSamplerKey carries into a stream handler's context the protocol-state
// sampler of the server's side of the stream's connection (the iperf
// download reports its own retransmissions as the sender).
type connSamplerKey struct{}

func withConnSampler(ctx context.Context, f func() transport.State) context.Context {
	if f == nil {
		return ctx
	}
	return context.WithValue(ctx, connSamplerKey{}, f)
}

// connSampler is the sampler of the stream's connection, nil if unknown.
func connSampler(ctx context.Context) func() transport.State {
	f, _ := ctx.Value(connSamplerKey{}).(func() transport.State)
	return f
}

// serveStream reads the Hello of a stream pattern, checks it against the
// ALPN and the limits, and runs the handler. A refusal or a malformed frame
// is answered with an error frame and ends the session, with a log line.
func (s *Server) serveStream(ctx context.Context, st transport.Stream, alpn string, peer net.Addr, qc *quic.Conn) {
	lim := s.cfg.Limits
	_ = st.SetDeadline(time.Now().Add(lim.ReadTimeout))
	r := wire.NewReader(st, streamFrameLimit)
	err := func() error {
		f, err := r.ReadFrame()
		if err != nil {
			return err
		}
		if f.Type != wire.TypeHello {
			return &wire.ErrorFrame{Code: wire.CodeMalformed, Reason: fmt.Sprintf("first frame is %s, want hello", f.Type)}
		}
		h, err := wire.DecodeHello(f.Body)
		if err != nil {
			return &wire.ErrorFrame{Code: wire.CodeMalformed, Reason: err.Error()}
		}
		handler, ok := s.mux.Streams[h.Kind]
		if !ok || s.mux.Families[h.Kind] != alpn {
			return &wire.ErrorFrame{Code: wire.CodeMalformed, Reason: fmt.Sprintf("%s stream on ALPN %s", h.Kind, alpn)}
		}
		if h.Duration > lim.MaxDuration {
			return &wire.ErrorFrame{Code: wire.CodeLimit, Reason: fmt.Sprintf("duration %s above limit %s", h.Duration, lim.MaxDuration)}
		}
		if h.Interval > 0 && h.Interval < 10*time.Millisecond {
			return &wire.ErrorFrame{Code: wire.CodeLimit, Reason: fmt.Sprintf("interval %s below 10ms", h.Interval)}
		}
		s.log.Debug("stream", "client", peer.String(), "kind", h.Kind.String(), "duration", h.Duration)
		return handler(ctx, st, h, r)
	}()
	if err == nil {
		// Read until the client closes so the kernel does not reset a TCP
		// connection whose receive queue still holds its close_notify.
		_ = st.SetDeadline(time.Now().Add(2 * time.Second))
		_, _ = io.Copy(io.Discard, st)
		st.Close()
		return
	}
	var ef *wire.ErrorFrame
	if errors.As(err, &ef) || errors.Is(err, wire.ErrMalformed) {
		if ef == nil {
			ef = &wire.ErrorFrame{Code: wire.CodeMalformed, Reason: err.Error()}
		}
		s.log.Warn("session closed", "client", peer.String(), "code", ef.Code.String(), "reason", ef.Reason)
		_ = st.SetDeadline(time.Now().Add(time.Second))
		_ = wire.WriteFrame(st, wire.TypeError, ef.Encode())
		_ = st.CloseWrite()
		if qc != nil && ef.Code == wire.CodeMalformed {
			time.Sleep(50 * time.Millisecond) // let the error frame go out first
			_ = qc.CloseWithError(quic.ApplicationErrorCode(ef.Code), ef.Reason)
		}
		st.Close()
		return
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		s.log.Info("session ended", "client", peer.String(), "reason", err.Error())
	}
	st.Close()
}

// handshakeLimits bound the handshake stage: far more places than
// sessions (a handshake is short and cheap to hold), a few per client.
func handshakeLimits(l Limits) Limits {
	return Limits{MaxSessions: 16 * max(l.MaxSessions, 1), MaxPerClient: 4 * max(l.MaxPerClient, 1), ClientPrefix4: l.ClientPrefix4}
}

// refuseTCP tells a client refused for a limit why, as QUIC clients are
// told in CONNECTION_CLOSE: an error frame on the stream ALPNs, a 503 with
// the reason over HTTP.
func refuseTCP(tc *tls.Conn, reason string) {
	defer tc.Close()
	_ = tc.SetDeadline(time.Now().Add(2 * time.Second))
	switch tc.ConnectionState().NegotiatedProtocol {
	case wire.ALPNIperf, wire.ALPNInteractive:
		_ = wire.WriteFrame(tc, wire.TypeError, (&wire.ErrorFrame{Code: wire.CodeBusy, Reason: reason}).Encode())
	case wire.ALPNHTTP2:
		h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, reason, http.StatusServiceUnavailable) })
		(&http2.Server{}).ServeConn(tc, &http2.ServeConnOpts{Handler: h})
		return
	default:
		fmt.Fprintf(tc, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(reason), reason)
	}
	_ = tc.CloseWrite()
	_, _ = io.Copy(io.Discard, io.LimitReader(tc, 64<<10)) // let the client read it before the close
}

// limiter caps concurrent sessions overall and per client address.
type limiter struct {
	mu          sync.Mutex
	total       int
	per         map[netip.Prefix]int
	max, maxPer int
	prefix4     int
}

func newLimiter(l Limits) *limiter {
	p4 := l.ClientPrefix4
	if p4 <= 0 || p4 > 32 {
		p4 = 32
	}
	return &limiter{per: map[netip.Prefix]int{}, max: l.MaxSessions, maxPer: l.MaxPerClient, prefix4: p4}
}

// client is the prefix that counts as one client: an IPv6 host is given a
// whole /64, so counting single addresses would let it take every slot.
func (l *limiter) client(ip netip.Addr) netip.Prefix {
	bits := 64
	if ip.Is4() {
		bits = l.prefix4
	}
	p, _ := ip.Prefix(bits)
	return p
}

// acquire returns a release function, or nil and the reason for refusal.
func (l *limiter) acquire(addr netip.Addr) (func(), string) {
	ip := l.client(addr.Unmap())
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.max > 0 && l.total >= l.max {
		return nil, fmt.Sprintf("server at its limit of %d sessions", l.max)
	}
	if l.maxPer > 0 && l.per[ip] >= l.maxPer {
		return nil, fmt.Sprintf("client %s at its limit of %d sessions", ip, l.maxPer)
	}
	l.total++
	l.per[ip]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.total--
			if l.per[ip]--; l.per[ip] <= 0 {
				delete(l.per, ip)
			}
		})
	}, ""
}

// chanListener hands already-handshaken TLS connections to http.Server,
// which serves HTTP/2 or HTTP/1.1 according to their ALPN.
type chanListener struct {
	addr   net.Addr
	ch     chan net.Conn
	done   chan struct{}
	closed sync.Once
}

func newChanListener(a net.Addr) *chanListener {
	return &chanListener{addr: a, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.closed.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }
