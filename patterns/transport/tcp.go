package transport

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

	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/probe/nw"
)

// The tcp and mptcp transports: TLS over TCP, or over kernel MPTCP. One
// listener (MPTCP-capable: it accepts plain TCP too) serves both.
const (
	nameTCP   = "tcp"
	nameMPTCP = "mptcp"
	// Sample keys: a TCP connection's tcp_info, an MPTCP connection's
	// MPTCP_FULL_INFO (or tcp_info when it fell back to TCP).
	keyTCPInfo = "tcp_info"
	keyMPTCP   = "mptcp"
)

// HTTP ALPNs over TLS/TCP.
const (
	alpnHTTP2 = "h2"
	alpnHTTP1 = "http/1.1"
)

func init() {
	// Header overhead: IPv4 (20) + TCP with timestamps (32) on each full
	// segment (1448 bytes at MTU 1500) is 3.6%, and a direction also
	// carries the acks of the other direction's data (one per two
	// segments: 1.8%): 6% stated. MPTCP adds DSS options on data and acks
	// (up to 28 bytes) and its cellular subflow runs at MTU 1428: 10%.
	Register(Descriptor{Name: nameTCP, Help: "TLS over TCP", Order: 10, Network: "tcp", DefaultPort: 443,
		HeaderOverhead: 0.06,
		New:            func(o Options) (Transport, error) { return &tcpTransport{o: o}, nil },
		Listen:         listenTCP})
	Register(Descriptor{Name: nameMPTCP, Help: "TLS over kernel MPTCP (subflows on the selected paths; Network.framework on macOS)", Order: 20,
		Network: "tcp", DefaultPort: 443, Multipath: true, SourceBound: true, HostRoles: true, Handover: true, ServedBy: nameTCP, HeaderOverhead: 0.10,
		New:       func(o Options) (Transport, error) { return &tcpTransport{o: o, mptcp: true}, nil },
		Summarise: summariseMPTCP})
}

// tcpTransport is TLS over TCP or over MPTCP.
type tcpTransport struct {
	o     Options
	mptcp bool
}

func (t *tcpTransport) Name() string {
	if t.mptcp {
		return nameMPTCP
	}
	return nameTCP
}

func (t *tcpTransport) Dial(ctx context.Context, addr netip.AddrPort, family string) (Conn, error) {
	start := time.Now()
	network := "tcp4"
	if addr.Addr().Unmap().Is6() {
		network = "tcp6"
	}
	var (
		raw   net.Conn
		nwc   *nw.Conn
		facts *MPTCPStatus
	)
	switch {
	case t.mptcp && useNetworkFramework:
		c, st, err := dialNetworkFramework(ctx, t.o, addr)
		if err != nil {
			return nil, wrap(opConnect, fmt.Errorf("mptcp: %w", err), nil)
		}
		raw, nwc, facts = c, c, st
		start = c.Started() // as over Linux: from the connect, not the interface lookup
	case t.mptcp:
		mc, err := probe.DialMPTCP(ctx, t.o.Primary(), network, addr.String())
		if err != nil {
			return nil, wrap(opConnect, fmt.Errorf("mptcp: %w", err), nil)
		}
		raw, facts = mc.TCPConn, &MPTCPStatus{Negotiated: &mc.Negotiated}
	default:
		c, err := probe.DialContext(ctx, t.o.Primary(), network, addr.String())
		if err != nil {
			return nil, wrap(opConnect, err, nil)
		}
		raw = c
	}
	LimitUnsent(raw)
	cfg := t.o.TLS.Clone()
	cfg.NextProtos = offered(family, tcpHTTPALPNs(t.o.HTTP1))
	tc := tls.Client(raw, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, wrap(opHandshake, err, nil)
	}
	c := &tcpConn{tls: tc, raw: raw, nw: nwc, mptcp: t.mptcp, paths: t.o.Paths, status: facts, info: Info{
		Transport: t.Name(), Local: raw.LocalAddr().String(), Remote: raw.RemoteAddr().String(),
		ALPN: tc.ConnectionState().NegotiatedProtocol, Setup: time.Since(start),
	}}
	if facts != nil {
		c.info.Facts = facts
	}
	if nwc != nil {
		establishment(ctx, nwc, facts)
	}
	return c, nil
}

func tcpHTTPALPNs(http1 bool) []string {
	if http1 {
		return []string{alpnHTTP1}
	}
	return []string{alpnHTTP2, alpnHTTP1}
}

// MPTCPStatus of one connection: whether the server spoke MPTCP (the
// kernel silently falls back to TCP otherwise).
type MPTCPStatus struct {
	// Negotiated is what the client's kernel says; null where the client
	// cannot tell (macOS: Network.framework does not say).
	Negotiated *bool `json:"negotiated"`
	// ServerSaw is the server's word on whether this client spoke MPTCP
	// (mptester serve says it in every HTTP response); absent when the
	// server did not say.
	ServerSaw *bool `json:"server_mptcp,omitempty"`
	// Service is the macOS multipath service the connection asked for.
	Service string `json:"service,omitempty"`
	// Establishment is Network.framework's establishment report (macOS).
	Establishment *nw.Report `json:"establishment,omitempty"`
}

// used is the connection's MPTCP use as best known: the client's own
// view, else the server's; nil when neither said.
func (s *MPTCPStatus) used() *bool {
	if s.Negotiated != nil {
		return s.Negotiated
	}
	return s.ServerSaw
}

// Key of the connection fact.
func (*MPTCPStatus) Key() string { return keyMPTCP }

type tcpConn struct {
	tls    *tls.Conn
	raw    net.Conn
	nw     *nw.Conn // MPTCP through Network.framework (macOS)
	mptcp  bool
	paths  []PathRole
	info   Info
	status *MPTCPStatus // nil over TCP

	mu     sync.Mutex
	opened bool
	rt     *http.Transport
}

// errUsed: over TCP a connection is one stream.
var errUsed = errors.New("tcp connection already carries a stream")

func (c *tcpConn) OpenStream(ctx context.Context) (Stream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.opened {
		return nil, errUsed
	}
	c.opened = true
	return classified{Stream: c.tls}, nil
}

func (c *tcpConn) MultiStream() bool { return false }

// RoundTripper speaks HTTP/1.1 or HTTP/2 (per ALPN) on this connection only:
// the dial function hands out the established connection once and refuses
// to open another, so a lost connection is an error, not a silent redial.
func (c *tcpConn) RoundTripper() http.RoundTripper {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rt != nil {
		if c.status != nil {
			return classifiedRT{rt: serverSaysRT{rt: c.rt, st: c.status, mu: &c.mu}}
		}
		return classifiedRT{rt: c.rt}
	}
	c.opened = true
	var once sync.Once
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var conn net.Conn
		once.Do(func() { conn = c.tls })
		if conn == nil {
			return nil, &Error{Status: StatusConnectionClosed, Op: opHTTP, Err: errors.New("connection to the server was lost")}
		}
		return conn, nil
	}
	c.rt = &http.Transport{DialTLSContext: dial, ForceAttemptHTTP2: true, MaxConnsPerHost: 1,
		MaxIdleConnsPerHost: 1, DisableCompression: true}
	if c.status != nil {
		return classifiedRT{rt: serverSaysRT{rt: c.rt, st: c.status, mu: &c.mu}}
	}
	return classifiedRT{rt: c.rt}
}

func (c *tcpConn) Info() Info { return c.info }

func (c *tcpConn) Sample() State {
	if c.nw != nil {
		return sampleNetworkFramework(c.nw, c.paths)
	}
	raw := c.raw.(*net.TCPConn)
	if !c.mptcp {
		return sampleTCP(raw)
	}
	st := sampleMPTCP(raw)
	if m, ok := st.Data.(*MPTCPState); ok {
		// Subflows are per-path facts: name each by the path whose
		// address it uses.
		for i, sf := range m.Subflows {
			ifindex := 0
			for _, p := range c.paths {
				if p.HasAddr(sf.Local.Addr()) {
					m.Subflows[i].Path = p.Name
					m.Subflows[i].Backup = p.Role == RoleBackup
					ifindex = p.Index
					break
				}
			}
			// The kernel's own flag where it says (CAP_NET_ADMIN).
			if f, err := subflowFlags(sf.Local, sf.Remote, ifindex); err == nil {
				m.Subflows[i].KernelFlags = &f
				m.Subflows[i].Backup = f&(SubflowBackupLocal|SubflowBackupRemote) != 0
			}
		}
	}
	return st
}

func (c *tcpConn) Close() error {
	if c.rt != nil {
		c.rt.CloseIdleConnections()
	}
	return c.tls.Close()
}

// MPTCPSummary says whether MPTCP was really used (000 §II-B).
type MPTCPSummary struct {
	// Negotiated: every connection used MPTCP, by the client's own view
	// or, where the client cannot tell (macOS), the server's; null when
	// neither said.
	Negotiated *bool `json:"negotiated"`
	// ServerSaw: the server's word, over the connections it gave it for.
	ServerSaw *bool `json:"server_mptcp,omitempty"`
	// Subflows is the largest number of subflows seen on any connection.
	Subflows int `json:"subflows"`
	// SubflowBytes: bytes acked (sent) and received per subflow, from the
	// last sample of each connection, keyed by local->remote address.
	SubflowBytes []PathCounters `json:"subflow_bytes"`
}

// Key of the record summary.
func (*MPTCPSummary) Key() string { return keyMPTCP }

// Degraded: a server that silently fell back to TCP, or that saw plain
// TCP from this client, fails the smoke check. Unknown is not degraded:
// the record says null.
func (s *MPTCPSummary) Degraded() string {
	switch {
	case s.Negotiated != nil && !*s.Negotiated:
		return "MPTCP not negotiated (server fell back to TCP)"
	case s.ServerSaw != nil && !*s.ServerSaw:
		return "the server saw plain TCP from this client"
	}
	return ""
}

// and folds one more answer into a running conjunction.
func and(acc, v *bool) *bool {
	switch {
	case v == nil:
		return acc
	case acc == nil:
		b := *v
		return &b
	}
	b := *acc && *v
	return &b
}

func summariseMPTCP(conns []ConnSamples) Fact {
	var sum *MPTCPSummary
	for _, c := range conns {
		st, ok := c.Info.Facts.(*MPTCPStatus)
		if !ok {
			continue
		}
		if sum == nil {
			sum = &MPTCPSummary{SubflowBytes: []PathCounters{}}
		}
		sum.Negotiated = and(sum.Negotiated, st.used())
		sum.ServerSaw = and(sum.ServerSaw, st.ServerSaw)
		var last *MPTCPState
		for _, s := range c.Samples {
			if m, ok := s.Data.(*MPTCPState); ok {
				sum.Subflows = max(sum.Subflows, m.NumSubflow)
				last = m
			}
		}
		if last != nil {
			sum.SubflowBytes = append(sum.SubflowBytes, last.PerPath()...)
		}
	}
	if sum == nil {
		return nil
	}
	return sum
}

// AcceptedSampler samples a TCP connection a server accepted: MPTCP_FULL_INFO
// when the client negotiated MPTCP, TCP_INFO otherwise (what the client's
// Conn.Sample reads on its side). Nil for a connection that is not TCP.
func AcceptedSampler(c net.Conn) func() State {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	if mp, _ := tc.MultipathTCP(); mp {
		return func() State { return sampleMPTCP(tc) }
	}
	return func() State { return sampleTCP(tc) }
}

// tcpListener is the TLS/TCP server side: stream ALPNs are handed to the
// patterns, HTTP ones to one http.Server (HTTP/1.1 and HTTP/2 by ALPN).
type tcpListener struct {
	ln    net.Listener
	mptcp bool
	o     ListenOptions
	http  *http.Server
	hl    *chanListener

	mu   sync.Mutex
	done map[net.Conn]chan struct{} // HTTP sessions, closed when they end
	// clientMPTCP: whether the client of each HTTP session spoke MPTCP
	// (where the OS says), for the response header.
	clientMPTCP map[net.Conn]bool
}

func listenTCP(ctx context.Context, o ListenOptions) (Listener, error) {
	l := &tcpListener{o: o, done: map[net.Conn]chan struct{}{}, clientMPTCP: map[net.Conn]bool{}, mptcp: slices.Contains(o.Serves, nameMPTCP)}
	if s, ok := o.Socket.(net.Listener); ok {
		l.ln = s
	} else {
		var lc net.ListenConfig
		// The standard library's MPTCP listener accepts plain TCP too.
		lc.SetMultipathTCP(l.mptcp)
		ln, err := lc.Listen(ctx, "tcp", o.Addr)
		if err != nil {
			return nil, fmt.Errorf("listen tcp %s: %w", o.Addr, err)
		}
		l.ln = ln
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	l.hl = newChanListener(l.ln.Addr())
	h := o.HTTP
	if h != nil {
		h = sayClientMPTCP(h)
	}
	l.http = &http.Server{Handler: h, ConnContext: l.withClientMPTCP, ReadHeaderTimeout: o.ReadTimeout, IdleTimeout: o.IdleTimeout,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelDebug), ConnState: l.connState,
		Protocols: new(http.Protocols)}
	l.http.Protocols.SetHTTP1(true)
	l.http.Protocols.SetHTTP2(true)
	go func() { _ = l.http.Serve(l.hl) }()
	return l, nil
}

func (l *tcpListener) Addr() net.Addr { return l.ln.Addr() }

func (l *tcpListener) Describe() string {
	mp := "off"
	if l.mptcp {
		mp = "on"
	}
	return fmt.Sprintf("TLS: h2, http/1.1, stream patterns; MPTCP %s", mp)
}

func (l *tcpListener) Accept(ctx context.Context) (ServerConn, error) {
	c, err := l.ln.Accept()
	if err != nil {
		return nil, err
	}
	return &tcpServerConn{l: l, raw: c}, nil
}

func (l *tcpListener) Shutdown(ctx context.Context) error {
	l.ln.Close()
	l.hl.Close()
	return l.http.Shutdown(ctx)
}

func (l *tcpListener) Close() error {
	l.ln.Close()
	l.hl.Close()
	return l.http.Close()
}

func (l *tcpListener) connState(c net.Conn, st http.ConnState) {
	if st != http.StateClosed && st != http.StateHijacked {
		return
	}
	l.mu.Lock()
	ch, ok := l.done[c]
	delete(l.done, c)
	delete(l.clientMPTCP, c)
	l.mu.Unlock()
	if ok {
		close(ch)
	}
}

type tcpServerConn struct {
	l      *tcpListener
	raw    net.Conn
	tc     *tls.Conn
	opened bool
	// mptcp, known: whether the client spoke MPTCP, where the OS says.
	mptcp, known bool
}

func (c *tcpServerConn) RemoteAddr() net.Addr { return c.raw.RemoteAddr() }

// Refuse closes the connection before the handshake; after it, an HTTP
// client is answered 503 with the reason (as QUIC clients read it in
// CONNECTION_CLOSE), in the HTTP version it chose.
func (c *tcpServerConn) Refuse(reason string) {
	if c.tc == nil {
		c.raw.Close()
		return
	}
	defer c.tc.Close()
	_ = c.tc.SetDeadline(time.Now().Add(2 * time.Second))
	if c.tc.ConnectionState().NegotiatedProtocol == alpnHTTP2 {
		h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, reason, http.StatusServiceUnavailable) })
		serveOneConn(c.tc, h)
		return
	}
	fmt.Fprintf(c.tc, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(reason), reason)
	_ = c.tc.CloseWrite()
	_, _ = io.Copy(io.Discard, io.LimitReader(c.tc, 64<<10)) // let the client read it before the close
}

func (c *tcpServerConn) Handshake(ctx context.Context) (string, bool, error) {
	cfg := &tls.Config{Certificates: []tls.Certificate{c.l.o.Certificate}, MinVersion: tls.VersionTLS12,
		NextProtos: append(tcpHTTPALPNs(false), c.l.o.StreamALPNs...)}
	c.tc = tls.Server(c.raw, cfg)
	if d, ok := ctx.Deadline(); ok {
		_ = c.raw.SetDeadline(d)
	}
	if err := c.tc.HandshakeContext(ctx); err != nil {
		return "", false, err
	}
	_ = c.raw.SetDeadline(time.Time{})
	alpn := c.tc.ConnectionState().NegotiatedProtocol
	// After the handshake: a fallback to TCP has happened by now if at all.
	if c.mptcp, c.known = ClientSpokeMPTCP(c.raw); c.known && c.l.o.Logger != nil {
		c.l.o.Logger.Info("client connection", "client", c.raw.RemoteAddr().String(), "alpn", alpn, "mptcp", c.mptcp)
	}
	// No ALPN: a plain HTTPS client such as curl.
	return alpn, !slices.Contains(c.l.o.StreamALPNs, alpn), nil
}

func (c *tcpServerConn) ServeHTTP() {
	ch := make(chan struct{})
	c.l.mu.Lock()
	c.l.done[c.tc] = ch
	if c.known {
		c.l.clientMPTCP[c.tc] = c.mptcp
	}
	c.l.mu.Unlock()
	if !c.l.hl.push(c.tc) {
		c.l.mu.Lock()
		delete(c.l.done, c.tc)
		delete(c.l.clientMPTCP, c.tc)
		c.l.mu.Unlock()
		return
	}
	<-ch
}

func (c *tcpServerConn) AcceptStream(ctx context.Context) (Stream, error) {
	if c.opened {
		return nil, io.EOF
	}
	c.opened = true
	LimitUnsent(c.raw)
	return classified{Stream: c.tc}, nil
}

func (c *tcpServerConn) Sample() State {
	if f := AcceptedSampler(c.raw); f != nil {
		return f()
	}
	return errState("not a TCP connection")
}

func (c *tcpServerConn) Abort(uint64, string) { c.Close() }

func (c *tcpServerConn) Close() error {
	if c.tc != nil {
		return c.tc.Close()
	}
	return c.raw.Close()
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

// serveOneConn serves HTTP on one established TLS connection (HTTP/2 when
// its ALPN chose h2: net/http's server takes the protocol from the
// handshake) and returns once that connection is closed.
func serveOneConn(tc *tls.Conn, h http.Handler) {
	l := &oneConnListener{conn: tc, done: make(chan struct{})}
	srv := &http.Server{Handler: h, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed || s == http.StateHijacked {
			l.finish()
		}
	}}
	_ = srv.Serve(l)
}

// oneConnListener hands out one connection, then blocks Accept until that
// connection is done, so http.Server.Serve returns when it is.
type oneConnListener struct {
	conn     net.Conn
	handed   bool
	done     chan struct{}
	doneOnce sync.Once
}

func (l *oneConnListener) finish() { l.doneOnce.Do(func() { close(l.done) }) }

func (l *oneConnListener) Accept() (net.Conn, error) {
	if !l.handed {
		l.handed = true
		return l.conn, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error   { l.finish(); return nil }
func (l *oneConnListener) Addr() net.Addr { return l.conn.LocalAddr() }
