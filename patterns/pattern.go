// Package patterns holds mptester's traffic patterns (000 §II-A: ping,
// bulk, iperf, interactive), both sides of each: the client side run by
// `mptester run` and the server side served by `mptester serve`. There is
// one Pattern interface and one registry; every pattern reaches the server
// through the one transport.Transport interface.
//
// Layers, each replaceable without touching the others:
//
//   - wire: framing of the stream patterns (fuzzed decoders).
//   - transport: the registry of transports (each one file registering a
//     Descriptor), over every selected path with its role; a multipath
//     transport's samples say what each path carried.
//   - Pattern (ping, bulk, iperf, interactive): client Run + server Register.
//   - RunTest: one pattern over one transport with sampling, byte counters
//     and error classification; Run: the stable-mode matrix (000 §II-A).
//     A mobile (handover) mode is another driver of RunTest that runs
//     interactive while paths change instead of stopping on a change.
package patterns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/patterns/wire"
)

// Pattern is one traffic pattern.
type Pattern interface {
	Name() string
	// Family is the ALPN family the pattern's connections use
	// (transport.FamilyHTTP or a stream pattern's own ALPN).
	Family() string
	// Run is the client side. It returns a JSON-encodable result; on error
	// the partial result (if any) is still recorded.
	Run(ctx context.Context, c *Client) (any, error)
	// Register installs the server side.
	Register(m *Mux)
}

var (
	regMu    sync.RWMutex
	registry = map[string]Pattern{}
)

// Register adds a pattern to the registry; a duplicate name panics (a
// programming error found at init).
func Register(p Pattern) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[p.Name()]; dup {
		panic("patterns: duplicate pattern " + p.Name())
	}
	registry[p.Name()] = p
}

// Get returns the pattern named name.
func Get(name string) (Pattern, error) {
	regMu.RLock()
	defer regMu.RUnlock()
	p, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("unknown pattern %q (want %s)", name, strings.Join(namesLocked(), ", "))
	}
	return p, nil
}

// CheckName checks that name is a pattern (a config file's or a flag's
// value).
func CheckName(name string) error {
	_, err := Get(name)
	return err
}

// Names lists the registered patterns in the order of 000 §II-A.
func Names() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	return namesLocked()
}

var canonical = []string{"ping", "bulk", "iperf", "interactive"}

func namesLocked() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := slices.Index(canonical, names[i]), slices.Index(canonical, names[j])
		if a < 0 || b < 0 {
			return names[i] < names[j]
		}
		return a < b
	})
	return names
}

// Params are the pattern options. Zero values take the defaults of 000 §II.
type Params struct {
	PingCount int           `json:"ping_count,omitempty"`
	PingGap   time.Duration `json:"ping_gap_ns,omitempty"`
	Size      int64         `json:"size,omitempty"`        // bulk bytes
	Duration  time.Duration `json:"duration_ns,omitempty"` // iperf (each direction) and interactive
	ChunkSize int           `json:"chunk_size,omitempty"`  // interactive
	Interval  time.Duration `json:"interval_ns,omitempty"` // interactive
	// AckGrace is how long a sender waits for the last acks after it stops.
	AckGrace time.Duration `json:"ack_grace_ns,omitempty"`
	// Direction of iperf: "both" (default), "upload" or "download".
	Direction string `json:"direction,omitempty"`
}

// Iperf directions.
const (
	DirectionBoth     = "both"
	DirectionUpload   = "upload"
	DirectionDownload = "download"
)

// Defaults from 000 §II-A and the issue.
const (
	DefaultPingCount = 5
	DefaultPingGap   = 200 * time.Millisecond
	DefaultBulkSize  = 10_000_000
	DefaultIperf     = 7 * time.Second
	DefaultChunk     = 2000
	DefaultInterval  = 100 * time.Millisecond
	DefaultAckGrace  = 2 * time.Second
)

// WithDefaults fills zero fields; duration defaults depend on the pattern.
func (p Params) WithDefaults(pattern string) Params {
	if p.PingCount <= 0 {
		p.PingCount = DefaultPingCount
	}
	if p.PingGap <= 0 {
		p.PingGap = DefaultPingGap
	}
	if p.Size <= 0 {
		p.Size = DefaultBulkSize
	}
	if p.Duration <= 0 {
		p.Duration = DefaultIperf
	}
	if p.ChunkSize <= 0 {
		p.ChunkSize = DefaultChunk
	}
	if p.Interval <= 0 {
		p.Interval = DefaultInterval
	}
	if p.AckGrace <= 0 {
		p.AckGrace = DefaultAckGrace
	}
	if p.Direction == "" {
		p.Direction = DirectionBoth
	}
	return p
}

// ErrConnectTimeout: the connect and handshake did not end within the
// client's ConnectTimeout.
var ErrConnectTimeout = errors.New("connect and handshake not done in time")

// Client is what a pattern's client side gets: a transport bound to a
// path, the server address for that transport, and its parameters.
type Client struct {
	Transport transport.Transport
	Addr      netip.AddrPort
	Params    Params
	Logger    *slog.Logger
	// ConnectTimeout bounds each connect and TLS/QUIC handshake, apart
	// from the test's timeout: a server that accepts and never answers
	// ends the test now, not when the transfer's time is up.
	ConnectTimeout time.Duration
	// Stop, when closed, ends a pattern that runs for a duration early and
	// cleanly (mobile mode: the primary path was lost and the grace time
	// passed); nil never closes.
	Stop <-chan struct{}
	// StallTimeout ends an HTTP transfer that receives nothing for this
	// long (0: DefaultStallTimeout).
	StallTimeout time.Duration

	mu    sync.Mutex
	conns []transport.Conn
	onNew func(transport.Conn)
}

func (c *Client) stallTimeout() time.Duration {
	if c.StallTimeout > 0 {
		return c.StallTimeout
	}
	return DefaultStallTimeout
}

// Dial opens a connection for family and tracks it: it is sampled while
// the test runs and closed when the test ends or is cancelled.
func (c *Client) Dial(ctx context.Context, family string) (transport.Conn, error) {
	dctx, cancel := ctx, context.CancelFunc(func() {})
	if c.ConnectTimeout > 0 {
		dctx, cancel = context.WithTimeoutCause(ctx, c.ConnectTimeout, ErrConnectTimeout)
	}
	conn, err := c.Transport.Dial(dctx, c.Addr, family)
	timedOut := errors.Is(context.Cause(dctx), ErrConnectTimeout)
	cancel()
	if err != nil {
		if timedOut && ctx.Err() == nil {
			return nil, fmt.Errorf("%w (%v, --connect-timeout): %w", ErrConnectTimeout, c.ConnectTimeout, err)
		}
		return nil, err
	}
	c.mu.Lock()
	c.conns = append(c.conns, conn)
	on := c.onNew
	c.mu.Unlock()
	if on != nil {
		on(conn)
	}
	return conn, nil
}

// Conns returns the connections dialed so far.
func (c *Client) Conns() []transport.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.conns)
}

// closeAll aborts every connection: blocked reads and writes return.
func (c *Client) closeAll() {
	for _, conn := range c.Conns() {
		conn.Close()
	}
}

// StreamHandler serves one stream of a stream pattern after its Hello.
type StreamHandler func(ctx context.Context, s transport.Stream, h wire.Hello, r *wire.Reader) error

// Mux is where patterns install their server side.
type Mux struct {
	HTTP    *http.ServeMux
	Streams map[wire.Kind]StreamHandler
	// Family of each stream kind: a stream must arrive on its ALPN.
	Families map[wire.Kind]string
	Limits   Limits
	Logger   *slog.Logger
}

// HandleStream installs the handler of a stream kind.
func (m *Mux) HandleStream(k wire.Kind, family string, h StreamHandler) {
	m.Streams[k] = h
	m.Families[k] = family
}

// Limits a public test server needs.
type Limits struct {
	MaxSessions  int `json:"max_sessions"`   // concurrent connections, all clients
	MaxPerClient int `json:"max_per_client"` // concurrent connections from one client (below)
	// ClientPrefix4 is the IPv4 prefix length that counts as one client;
	// an IPv6 client is its /64 (one host holds a whole /64). 0 means 32.
	ClientPrefix4 int           `json:"client_prefix4,omitempty"`
	MaxBulk       int64         `json:"max_bulk"` // largest bulk response
	MaxDuration   time.Duration `json:"max_duration_ns"`
	// HandshakeTimeout bounds a TLS handshake (0: ReadTimeout), which holds
	// no session slot.
	HandshakeTimeout time.Duration `json:"handshake_timeout_ns,omitempty"`
	ReadTimeout      time.Duration `json:"read_timeout_ns"` // wait for a request or the next frame
	IdleTimeout      time.Duration `json:"idle_timeout_ns"` // idle connection lifetime
}

func (l Limits) handshakeTimeout() time.Duration {
	if l.HandshakeTimeout > 0 {
		return l.HandshakeTimeout
	}
	return l.ReadTimeout
}

// DefaultLimits suit a small public server.
func DefaultLimits() Limits {
	return Limits{MaxSessions: 256, MaxPerClient: 16, ClientPrefix4: 32, MaxBulk: 100 << 20, MaxDuration: 60 * time.Second,
		HandshakeTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second}
}
