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
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mptester/mptester/mpquic"
	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/patterns/wire"
)

// ServerConfig of `mptester serve`.
type ServerConfig struct {
	// Certificate served on every listener.
	Certificate tls.Certificate
	// Listen gives, per listening transport (transport.Listeners), the
	// host:port addresses it binds (000 §III: QUIC on 443 and 6121).
	Listen map[string][]string
	// Sockets gives, per listening transport, sockets opened elsewhere
	// (e.g. in a lab's network namespace): a net.Listener or a
	// net.PacketConn as the transport's Network says. The server closes them.
	Sockets map[string][]any
	// Transports served (default: every registered one). A transport whose
	// listener belongs to another is served by that listener when listed
	// (leaving out mptcp gives a plain TCP listener).
	Transports []string
	Limits     Limits
	Logger     *slog.Logger
	// QlogDir, when set, receives a qlog trace per QUIC connection.
	QlogDir string
	// MPQUICRetry: the mpquic listener sends every client a Retry first.
	MPQUICRetry bool
	// MPQUICCongestion is mpquic's congestion control (empty: CUBIC).
	MPQUICCongestion mpquic.CongestionControl
}

// Bound is one listener of a running server.
type Bound struct {
	Transport string // the listening transport
	Serves    []string
	Addr      net.Addr
	Describe  string
	ln        transport.Listener
}

// Server serves every registered pattern over every listening transport.
type Server struct {
	cfg ServerConfig
	mux *Mux
	log *slog.Logger
	lim *limiter
	hs  *limiter // the handshake stage: no session slot until it ends

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	bound []Bound

	mu    sync.Mutex
	conns map[transport.ServerConn]struct{} // open sessions

	lastFree atomic.Int64 // returnMemory's last run, Unix nanoseconds
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
	if len(cfg.Transports) == 0 {
		cfg.Transports = transport.Names()
	}
	any := false
	for _, t := range cfg.Transports {
		if _, err := transport.Get(t); err != nil {
			return nil, fmt.Errorf("serve: %w", err)
		}
	}
	for name := range cfg.Listen {
		if _, err := transport.Get(name); err != nil {
			return nil, fmt.Errorf("serve: %w", err)
		}
		any = any || len(cfg.Listen[name]) > 0
	}
	for name := range cfg.Sockets {
		any = any || len(cfg.Sockets[name]) > 0
	}
	if !any {
		return nil, errors.New("serve: no listener configured")
	}
	m := &Mux{HTTP: http.NewServeMux(), Streams: map[wire.Kind]StreamHandler{}, Families: map[wire.Kind]string{},
		Limits: cfg.Limits, Logger: cfg.Logger}
	for _, n := range Names() {
		p, _ := Get(n)
		p.Register(m)
	}
	s := &Server{cfg: cfg, mux: m, log: cfg.Logger, lim: newLimiter(cfg.Limits), hs: newLimiter(handshakeLimits(cfg.Limits)),
		conns: map[transport.ServerConn]struct{}{}}
	s.lim.onIdle = s.returnMemory
	return s, nil
}

// streamALPNs are the stream patterns' families, offered on every listener.
func (s *Server) streamALPNs() []string {
	var out []string
	for _, f := range s.mux.Families {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out
}

// Start binds every listener and serves until Shutdown.
func (s *Server) Start(ctx context.Context) error {
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	lim := s.cfg.Limits
	for _, d := range transport.Listeners() {
		var serves []string
		for _, t := range s.cfg.Transports {
			if td, _ := transport.Get(t); td.Listener() == d.Name {
				serves = append(serves, t)
			}
		}
		if len(serves) == 0 {
			continue
		}
		o := transport.ListenOptions{Certificate: s.cfg.Certificate, StreamALPNs: s.streamALPNs(), HTTP: s.mux.HTTP,
			Serves: serves, ReadTimeout: lim.ReadTimeout, IdleTimeout: lim.IdleTimeout, Logger: s.log, QlogDir: s.cfg.QlogDir,
			MPQUICRetry: s.cfg.MPQUICRetry, MPQUICCongestion: s.cfg.MPQUICCongestion}
		var opts []transport.ListenOptions
		for _, sock := range s.cfg.Sockets[d.Name] {
			o.Socket = sock
			opts = append(opts, o)
		}
		o.Socket = nil
		for _, a := range s.cfg.Listen[d.Name] {
			o.Addr = a
			opts = append(opts, o)
		}
		for _, o := range opts {
			ln, err := d.Listen(ctx, o)
			if err != nil {
				s.closeListeners()
				return err
			}
			b := Bound{Transport: d.Name, Serves: serves, Addr: ln.Addr(), Describe: ln.Describe(), ln: ln}
			s.bound = append(s.bound, b)
			s.wg.Add(1)
			go func() { defer s.wg.Done(); s.accept(ln) }()
			s.log.Info("listening", "transport", d.Name, "serves", serves, "addr", b.Addr.String())
		}
	}
	if len(s.bound) == 0 {
		return errors.New("serve: no listener for the served transports")
	}
	return nil
}

// Bound lists the listeners in the order they were opened.
func (s *Server) Bound() []Bound { return slices.Clone(s.bound) }

// Addrs are the bound addresses of the listeners that serve the transport
// named name (its own or its ServedBy's).
func (s *Server) Addrs(name string) []net.Addr {
	out := []net.Addr{}
	for _, b := range s.bound {
		if slices.Contains(b.Serves, name) {
			out = append(out, b.Addr)
		}
	}
	return out
}

func (s *Server) closeListeners() {
	for _, b := range s.bound {
		b.ln.Close()
	}
}

// Shutdown stops accepting, lets running sessions finish until ctx ends,
// then closes everything.
func (s *Server) Shutdown(ctx context.Context) error {
	var errs []error
	for _, b := range s.bound {
		errs = append(errs, b.ln.Shutdown(ctx))
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, ctx.Err())
	}
	s.Close()
	if s.cfg.QlogDir != "" {
		// The traces of the connections just closed are finished by their
		// writers after the connections end.
		errs = append(errs, waitQlogs(ctx))
	}
	return errors.Join(errs...)
}

// Close stops everything at once (as if killed): stream sessions see their
// context cancelled and every socket is closed.
func (s *Server) Close() {
	if s.cancel != nil {
		s.cancel()
	}
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.closeListeners()
}

func remoteIP(a net.Addr) netip.Addr {
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

func (s *Server) track(c transport.ServerConn, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if on {
		s.conns[c] = struct{}{}
	} else {
		delete(s.conns, c)
	}
}

func (s *Server) accept(ln transport.Listener) {
	for {
		c, err := ln.Accept(s.ctx)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) && s.ctx.Err() == nil {
				s.log.Warn("accept", "err", err)
			}
			return
		}
		// A connection that has not finished its handshake holds a place
		// in the handshake stage (bounded, short timeout), never a session
		// slot: half-open connections cannot lock real clients out.
		hsRelease, reason := s.hs.acquire(remoteIP(c.RemoteAddr()))
		if hsRelease == nil {
			s.log.Info("handshake refused", "client", c.RemoteAddr().String(), "reason", reason)
			c.Refuse(reason)
			continue
		}
		s.track(c, true)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.track(c, false)
			s.serveConn(c, hsRelease)
		}()
	}
}

// serveConn completes the handshake, takes a session slot and serves HTTP
// or the stream patterns according to the ALPN.
func (s *Server) serveConn(c transport.ServerConn, hsRelease func()) {
	defer c.Close()
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.Limits.handshakeTimeout())
	alpn, isHTTP, err := c.Handshake(ctx)
	cancel()
	hsRelease()
	if err != nil {
		s.log.Info("session closed", "client", c.RemoteAddr().String(), "reason", "tls handshake: "+err.Error())
		return
	}
	release, reason := s.lim.acquire(remoteIP(c.RemoteAddr()))
	if release == nil {
		s.log.Info("session refused", "client", c.RemoteAddr().String(), "reason", reason)
		if isHTTP {
			c.Refuse(reason)
		} else {
			s.refuseStream(c, reason)
		}
		return
	}
	defer release()
	if isHTTP {
		c.ServeHTTP()
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	sctx := withConnSampler(s.ctx, c.Sample)
	// The connection's slot covers one stream at a time; each more stream
	// running at once on it (QUIC) takes a slot of its own, as the TCP
	// connection it stands for would: a client's 100 streams are 100
	// sessions for --max-sessions and the per-client cap.
	var running atomic.Int64
	for {
		st, err := c.AcceptStream(s.ctx)
		if err != nil {
			if s.ctx.Err() != nil {
				c.Abort(uint64(wire.CodeShutdown), "server stopping")
			}
			return
		}
		rel := func() {}
		if running.Add(1) > 1 {
			r, reason := s.lim.acquire(remoteIP(c.RemoteAddr()))
			if r == nil {
				s.log.Info("stream refused", "client", c.RemoteAddr().String(), "reason", reason)
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer running.Add(-1)
					s.refuseOnStream(st, reason)
				}()
				continue
			}
			rel = r
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer running.Add(-1)
			defer rel()
			s.serveStream(sctx, st, alpn, c)
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
func (s *Server) serveStream(ctx context.Context, st transport.Stream, alpn string, c transport.ServerConn) {
	peer := c.RemoteAddr()
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
		if c != nil && ef.Code == wire.CodeMalformed {
			time.Sleep(50 * time.Millisecond) // let the error frame go out first
			c.Abort(uint64(ef.Code), ef.Reason)
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

// refuseStream tells a stream-pattern client refused for a limit why, in
// an error frame on its first stream, as QUIC clients read it in
// CONNECTION_CLOSE.
func (s *Server) refuseStream(c transport.ServerConn, reason string) {
	ctx, cancel := context.WithTimeout(s.ctx, 2*time.Second)
	defer cancel()
	st, err := c.AcceptStream(ctx)
	if err != nil {
		c.Refuse(reason)
		return
	}
	s.refuseOnStream(st, reason)
}

// refuseOnStream answers a stream with an error frame giving the reason
// of a refusal for a limit.
func (s *Server) refuseOnStream(st transport.Stream, reason string) {
	_ = st.SetDeadline(time.Now().Add(2 * time.Second))
	_ = wire.WriteFrame(st, wire.TypeError, (&wire.ErrorFrame{Code: wire.CodeBusy, Reason: reason}).Encode())
	_ = st.CloseWrite()
	// Let the client read it before the close; a small buffer of our own
	// (io.Discard's pooled 8 KiB each): thousands of streams may be
	// refused at once.
	_, _ = io.CopyBuffer(struct{ io.Writer }{io.Discard}, io.LimitReader(st, 64<<10), make([]byte, 512))
	st.Close()
}

// limiter caps concurrent sessions overall and per client address.
type limiter struct {
	mu          sync.Mutex
	total       int
	per         map[netip.Prefix]int
	max, maxPer int
	prefix4     int
	onIdle      func() // when the last session ends (called without mu)
}

// returnMemory gives the memory the sessions freed back to the system
// once the last one ended, at most once a minute: the Go runtime returns
// it only after its next collection, which an idle server may not run for
// minutes (hostile clients left a test server at 223 MB a minute after
// they went, 61 MB once collected).
func (s *Server) returnMemory() {
	now, last := time.Now().UnixNano(), s.lastFree.Load()
	if now-last >= int64(time.Minute) && s.lastFree.CompareAndSwap(last, now) {
		go debug.FreeOSMemory()
	}
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
			l.total--
			if l.per[ip]--; l.per[ip] <= 0 {
				delete(l.per, ip)
			}
			idle := l.total == 0
			l.mu.Unlock()
			if idle && l.onIdle != nil {
				l.onIdle()
			}
		})
	}, ""
}

// inUse is the number of places taken (for tests that wait for sessions
// to end).
func (l *limiter) inUse() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}
