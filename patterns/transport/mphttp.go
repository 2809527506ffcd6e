package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mptester/mptester/mphttp"
	"github.com/mptester/mptester/probe"
)

// MPHTTP (study 003 §4.2-4.3): client-only multipath over HTTP byte
// ranges, one bound HTTP client per path, served by the tcp listener (the
// bulk object is served with ranges and a stable ETag). It carries only
// the HTTP patterns. Each request of a pattern is one mphttp.Fetch.
func init() {
	Register(Descriptor{Name: "mphttp", Help: "multipath HTTP: byte ranges over every path (003 §4.2), client only, HTTP patterns", Order: 50,
		Network: "tcp", DefaultPort: 443, Multipath: true, Families: []string{FamilyHTTP}, ServedBy: "tcp",
		// Its counters are HTTP body bytes: TCP/IP headers and the HTTP
		// headers of each range request are not in them.
		HeaderOverhead: 0.1,
		New:            func(o Options) (Transport, error) { return &mpHTTP{o: o}, nil },
	})
}

type mpHTTP struct{ o Options }

func (t *mpHTTP) Name() string { return "mphttp" }

// Dial connects on the primary path now (its setup time and errors are the
// connection's) and builds one client per path, bound to it, towards addr;
// the other paths connect when the scheduler first uses them.
func (t *mpHTTP) Dial(ctx context.Context, addr netip.AddrPort, family string) (Conn, error) {
	if family != FamilyHTTP {
		return nil, &Error{Status: StatusUnsupported, Op: opConnect, Err: errors.New("mphttp carries only HTTP")}
	}
	start := time.Now()
	c := &mpHTTPConn{}
	for i, pr := range t.o.Paths {
		p := pr.Path
		cfg := t.o.TLS.Clone()
		cfg.NextProtos = tcpHTTPALPNs(t.o.HTTP1)
		pc := &mpPathCounter{name: p.Name}
		dial := func(ctx context.Context) (net.Conn, error) {
			nc, err := probe.DialContext(ctx, p, "tcp", addr.String())
			if err != nil {
				return nil, wrap(opConnect, err, nil)
			}
			tc := tls.Client(nc, cfg)
			if err := tc.HandshakeContext(ctx); err != nil {
				nc.Close()
				return nil, wrap(opHandshake, err, nil)
			}
			pc.setEnds(nc)
			return tc, nil
		}
		var first net.Conn
		if i == 0 {
			var err error
			if first, err = dial(ctx); err != nil {
				return nil, err
			}
			c.setup = time.Since(start)
			c.alpn = first.(*tls.Conn).ConnectionState().NegotiatedProtocol
		}
		var once sync.Mutex
		tr := &http.Transport{
			// TLS is done here (bound dial, the options' pin); the first
			// connection of the primary path is the one Dial made.
			DialTLSContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				once.Lock()
				nc := first
				first = nil
				once.Unlock()
				if nc != nil {
					return nc, nil
				}
				return dial(ctx)
			},
			ForceAttemptHTTP2:  !t.o.HTTP1,
			DisableCompression: true,
		}
		c.trs = append(c.trs, tr)
		c.counters = append(c.counters, pc)
		c.paths = append(c.paths, mphttp.Path{Name: p.Name, Transport: countingRT{tr, pc}})
	}
	return c, nil
}

type mpHTTPConn struct {
	setup    time.Duration
	alpn     string
	trs      []*http.Transport
	paths    []mphttp.Path
	counters []*mpPathCounter
	mu       sync.Mutex
	last     *mphttp.Result
}

func (c *mpHTTPConn) OpenStream(context.Context) (Stream, error) {
	return nil, &Error{Status: StatusUnsupported, Op: opConnect, Err: errors.New("mphttp has no streams")}
}
func (c *mpHTTPConn) MultiStream() bool { return false }

// RoundTripper fetches each GET with mphttp over every path; the response
// streams the object in order as it is assembled.
func (c *mpHTTPConn) RoundTripper() http.RoundTripper { return mpHTTPRT{c} }

func (c *mpHTTPConn) Info() Info {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := Info{Transport: "mphttp", ALPN: c.alpn, Setup: c.setup}
	if len(c.counters) > 0 {
		if l, r := c.counters[0].ends(); l.IsValid() {
			i.Local, i.Remote = l.String(), r.String()
		}
	}
	if c.last != nil {
		i.Facts = mpHTTPFact{c.last}
	}
	return i
}

func (c *mpHTTPConn) Sample() State {
	s := mpHTTPSample{}
	for _, pc := range c.counters {
		l, r := pc.ends()
		s.Paths = append(s.Paths, PathCounters{Path: pc.name, Local: l, Remote: r, Received: uint64(pc.received.Load())})
	}
	return State{Key: "mphttp", Data: s}
}

func (c *mpHTTPConn) Close() error {
	for _, tr := range c.trs {
		tr.CloseIdleConnections()
	}
	return nil
}

// mpHTTPFact is the last download's result (bytes per path, consistency,
// timings), written under "mphttp" in the connection's record.
type mpHTTPFact struct{ *mphttp.Result }

func (mpHTTPFact) Key() string { return "mphttp" }

// mpHTTPSample: body bytes received per path so far.
type mpHTTPSample struct {
	Paths []PathCounters `json:"paths"`
}

func (s mpHTTPSample) Retransmissions() uint64 { return 0 }
func (s mpHTTPSample) Bytes() (sent, received uint64) {
	for _, p := range s.Paths {
		received += p.Received
	}
	return 0, received
}
func (s mpHTTPSample) PerPath() []PathCounters { return s.Paths }

type mpPathCounter struct {
	name     string
	received atomic.Int64
	mu       sync.Mutex
	local    netip.AddrPort
	remote   netip.AddrPort
}

func (p *mpPathCounter) setEnds(nc net.Conn) {
	l, _ := netip.ParseAddrPort(nc.LocalAddr().String())
	r, _ := netip.ParseAddrPort(nc.RemoteAddr().String())
	p.mu.Lock()
	p.local, p.remote = l, r
	p.mu.Unlock()
}

func (p *mpPathCounter) ends() (netip.AddrPort, netip.AddrPort) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.local, p.remote
}

// countingRT counts the body bytes each path receives.
type countingRT struct {
	rt http.RoundTripper
	pc *mpPathCounter
}

func (c countingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(r)
	if err != nil {
		return nil, wrap(opHTTP, err, nil)
	}
	resp.Body = &countingBody{resp.Body, c.pc}
	return resp, nil
}

type countingBody struct {
	io.ReadCloser
	pc *mpPathCounter
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.pc.received.Add(int64(n))
	return n, err
}

type mpHTTPRT struct{ c *mpHTTPConn }

// firstWrite reports when the download has started writing.
type firstWrite struct {
	w       io.Writer
	once    sync.Once
	started chan struct{}
}

func (f *firstWrite) Write(p []byte) (int, error) {
	f.once.Do(func() { close(f.started) })
	return f.w.Write(p)
}

// RoundTrip answers 200 with the object once its first bytes are there, or
// the server's error status, or the error.
func (rt mpHTTPRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		return nil, &Error{Status: StatusUnsupported, Op: opHTTP, Err: errors.New("mphttp fetches with GET only")}
	}
	pr, pw := io.Pipe()
	fw := &firstWrite{w: pw, started: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		res, err := mphttp.Fetch(req.Context(), req.URL.String(), fw, mphttp.Options{Paths: rt.c.paths})
		rt.c.mu.Lock()
		rt.c.last = res
		rt.c.mu.Unlock()
		done <- err
		_ = pw.CloseWithError(err)
	}()
	proto, major, minor := "HTTP/1.1", 1, 1 // what the paths speak: the primary's ALPN
	if rt.c.alpn == alpnHTTP2 {
		proto, major, minor = "HTTP/2.0", 2, 0
	}
	resp := &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: proto, ProtoMajor: major, ProtoMinor: minor,
		Header: http.Header{}, ContentLength: -1, Body: pr, Request: req}
	select {
	case <-fw.started:
		return resp, nil
	case err := <-done:
		var se *mphttp.StatusError
		switch {
		case errors.As(err, &se):
			resp.StatusCode, resp.Status = se.Code, http.StatusText(se.Code)
			resp.Body = io.NopCloser(strings.NewReader(se.Body))
			return resp, nil
		case err != nil:
			return nil, wrap(opHTTP, err, nil)
		}
		resp.Body = http.NoBody // an empty object
		return resp, nil
	}
}
