package nw

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Config of one MPTCP connection.
type Config struct {
	Service Service
	// Interface is the primary path's interface, required for the
	// connection ("" lets the framework choose).
	Interface string
	// Prohibit are the interface types none of the selected paths has.
	Prohibit []InterfaceType
}

const (
	// receiveMax bounds one nw_connection_receive.
	receiveMax = 64 << 10
	// sendMax bounds one nw_connection_send, sendWindow the bytes queued
	// and not yet completed: Write returns once its data is queued, like a
	// socket's send buffer, and blocks when the window is full.
	sendMax    = 64 << 10
	sendWindow = 1 << 20
	// closeWait bounds how long Close waits for queued data to be sent
	// and then for the framework's cancelled state.
	closeWait = 2 * time.Second
)

// Conn is an established nw_connection as a net.Conn.
type Conn struct {
	api API
	obj Object

	local, remote *net.TCPAddr

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every event
	state   State
	fatal   error // failed, or cancelled by Close
	ready   bool  // reached StateReady once

	rbuf      []byte
	eof       bool
	rerr      error
	receiving bool

	inflight  int
	werr      error
	wclosed   bool
	closed    bool
	released  bool
	readDL    time.Time
	writeDL   time.Time
	sent      atomic.Uint64
	received  atomic.Uint64
	cancelled bool

	// live guards obj against its release: every call that uses obj
	// holds it for reading, the release for writing; gone says obj was
	// released. Taken after mu, never before.
	live sync.RWMutex
	gone bool
	// down is closed once the connection is released.
	down chan struct{}
	// started is when the connection was started, after the parameters
	// were built (finding the interface takes a path monitor's round).
	started time.Time
}

// use runs f with obj if it is not released yet.
func (c *Conn) use(f func()) bool {
	c.live.RLock()
	defer c.live.RUnlock()
	if c.gone {
		return false
	}
	f()
	return true
}

// errCancelled is what a completion of a released connection reports.
var errCancelled = &Error{Domain: DomainPOSIX, Code: int(syscall.ECANCELED)}

// Dial connects to host:port with MPTCP as cfg says and waits for the
// connection to be ready. The framework's waiting state (no usable path,
// refused, unreachable) fails the dial at once with the error it gave:
// a measurement does not wait for a better network.
func Dial(ctx context.Context, api API, host, port string, cfg Config) (*Conn, error) {
	ep, err := api.NewEndpoint(host, port)
	if err != nil {
		return nil, fmt.Errorf("endpoint %s:%s: %w", host, port, err)
	}
	defer api.Release(ep)
	p := Params{Service: cfg.Service, Prohibit: cfg.Prohibit}
	if cfg.Interface != "" {
		iface, err := api.FindInterface(cfg.Interface)
		if err != nil {
			return nil, fmt.Errorf("interface %s: %w", cfg.Interface, err)
		}
		defer api.Release(iface)
		p.Interface = iface
	}
	params, err := api.NewParameters(p)
	if err != nil {
		return nil, fmt.Errorf("parameters: %w", err)
	}
	defer api.Release(params)
	obj, err := api.NewConnection(ep, params)
	if err != nil {
		return nil, fmt.Errorf("connection: %w", err)
	}
	c := &Conn{api: api, obj: obj, changed: make(chan struct{}), down: make(chan struct{})}
	api.SetStateHandler(obj, c.onState)
	c.started = time.Now()
	api.Start(obj)
	if err := c.waitReady(ctx); err != nil {
		c.shutdown()
		return nil, err
	}
	if path := api.CopyCurrentPath(obj); path != 0 {
		pi := api.ReadPath(path)
		api.Release(path)
		c.local, c.remote = net.TCPAddrFromAddrPort(pi.Local), net.TCPAddrFromAddrPort(pi.Remote)
	}
	return c, nil
}

// waitReady waits for ready; failed, waiting and the context end it.
func (c *Conn) waitReady(ctx context.Context) error {
	for {
		c.mu.Lock()
		st, ferr, ch := c.state, c.fatal, c.changed
		c.mu.Unlock()
		switch st {
		case StateReady:
			return nil
		case StateFailed, StateWaiting, StateCancelled:
			if ferr == nil {
				ferr = fmt.Errorf("connection %s", st)
			}
			return &net.OpError{Op: "dial", Net: "mptcp", Err: ferr}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return &net.OpError{Op: "dial", Net: "mptcp", Err: ctx.Err()}
		}
	}
}

// signalLocked wakes every waiter to look at the state again.
func (c *Conn) signalLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *Conn) onState(s State, e *Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state = s
	var err error
	if e != nil {
		err = e
	}
	switch s {
	case StateReady:
		c.ready = true
	case StateWaiting:
		// Before ready: why the dial fails. After ready the framework
		// has lost the path and may find another; reads and writes go on.
		if !c.ready && c.fatal == nil {
			c.fatal = err
		}
	case StateFailed:
		if c.fatal == nil {
			c.fatal = err
			if err == nil {
				c.fatal = errors.New("connection failed")
			}
		}
	case StateCancelled:
		c.cancelled = true
		if c.fatal == nil {
			c.fatal = net.ErrClosed
		}
	}
	c.signalLocked()
}

// wait blocks until the next event or the deadline; it is called with
// c.mu held and returns with it held.
func (c *Conn) waitLocked(dl time.Time) error {
	ch := c.changed
	var timer <-chan time.Time
	if !dl.IsZero() {
		d := time.Until(dl)
		if d <= 0 {
			return os.ErrDeadlineExceeded
		}
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	c.mu.Unlock()
	defer c.mu.Lock()
	select {
	case <-ch:
		return nil
	case <-timer:
		return os.ErrDeadlineExceeded
	}
}

func pastDeadline(dl time.Time) bool { return !dl.IsZero() && !time.Now().Before(dl) }

// Read returns buffered data first; it keeps at most one receive
// outstanding, so data arriving after a deadline waits for the next Read.
func (c *Conn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		switch {
		case c.closed:
			return 0, c.opErr("read", net.ErrClosed)
		case len(c.rbuf) > 0:
			if len(p) == 0 {
				return 0, nil
			}
			n := copy(p, c.rbuf)
			c.rbuf = c.rbuf[n:]
			if len(c.rbuf) == 0 {
				c.rbuf = nil
			}
			return n, nil
		case c.rerr != nil:
			return 0, c.opErr("read", c.rerr)
		case c.eof:
			return 0, io.EOF
		case c.fatal != nil && !c.receiving:
			return 0, c.opErr("read", c.fatal)
		case len(p) == 0:
			return 0, nil
		case pastDeadline(c.readDL):
			return 0, c.opErr("read", os.ErrDeadlineExceeded)
		}
		if !c.receiving {
			c.receiving = true
			c.mu.Unlock()
			if !c.use(func() { c.api.Receive(c.obj, receiveMax, c.onReceive) }) {
				c.onReceive(nil, false, errCancelled)
			}
			c.mu.Lock()
			continue
		}
		if err := c.waitLocked(c.readDL); err != nil {
			return 0, c.opErr("read", err)
		}
	}
}

func (c *Conn) onReceive(data []byte, eof bool, e *Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.receiving = false
	c.rbuf = append(c.rbuf, data...)
	c.received.Add(uint64(len(data)))
	if eof {
		c.eof = true
	}
	if e != nil && !c.eof {
		c.rerr = e
	}
	c.signalLocked()
}

// Write queues p and returns once all of it is queued (the window bounds
// what is queued and not yet sent); an error of an earlier send is
// returned by the next Write.
func (c *Conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for len(p) > 0 {
		switch {
		case c.closed:
			return n, c.opErr("write", net.ErrClosed)
		case c.werr != nil:
			return n, c.opErr("write", c.werr)
		case c.fatal != nil:
			return n, c.opErr("write", c.fatal)
		case c.wclosed:
			return n, c.opErr("write", syscall.EPIPE)
		case pastDeadline(c.writeDL):
			return n, c.opErr("write", os.ErrDeadlineExceeded)
		case c.inflight > 0 && c.inflight+min(len(p), sendMax) > sendWindow:
			if err := c.waitLocked(c.writeDL); err != nil {
				return n, c.opErr("write", err)
			}
			continue
		}
		chunk := p[:min(len(p), sendMax)]
		c.send(chunk, false)
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}

// send queues data; called with c.mu held, which it drops around the call
// (a completion may come at once).
func (c *Conn) send(data []byte, final bool) {
	size := len(data)
	c.inflight += size
	done := func(e *Error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.inflight -= size
		if e != nil {
			if c.werr == nil {
				c.werr = e
			}
		} else {
			c.sent.Add(uint64(size))
		}
		c.signalLocked()
	}
	c.mu.Unlock()
	if !c.use(func() { c.api.Send(c.obj, data, final, done) }) {
		done(errCancelled)
	}
	c.mu.Lock()
}

// CloseWrite sends the end of the stream (FIN) after the queued data and
// waits until the framework has taken it (bounded by the write deadline).
func (c *Conn) CloseWrite() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.opErr("close", net.ErrClosed)
	}
	if c.wclosed {
		return nil
	}
	if c.fatal != nil {
		return c.opErr("close", c.fatal)
	}
	c.wclosed = true
	c.send(nil, true)
	for c.inflight > 0 && c.fatal == nil {
		if err := c.waitLocked(c.writeDL); err != nil {
			return c.opErr("close", err)
		}
	}
	if c.werr != nil {
		return c.opErr("close", c.werr)
	}
	return nil
}

// Close lets queued data go (for at most closeWait), cancels the
// connection, waits for its cancelled state (bounded) and releases it.
// Blocked Reads and Writes return net.ErrClosed. A second Close returns
// net.ErrClosed once the first has released the connection.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		<-c.down
		return c.opErr("close", net.ErrClosed)
	}
	dl := time.Now().Add(closeWait)
	for c.inflight > 0 && c.fatal == nil {
		if c.waitLocked(dl) != nil {
			break
		}
	}
	c.closed = true
	c.signalLocked()
	c.mu.Unlock()
	c.shutdown()
	return nil
}

// shutdown cancels, waits for cancelled (bounded) and releases, once.
func (c *Conn) shutdown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return
	}
	c.released = true
	if !c.cancelled {
		c.mu.Unlock()
		c.api.Cancel(c.obj)
		c.mu.Lock()
		dl := time.Now().Add(closeWait)
		for !c.cancelled {
			if c.waitLocked(dl) != nil {
				break
			}
		}
	}
	// The framework holds its own references until cancellation ends;
	// ours goes now.
	c.live.Lock()
	c.gone = true
	c.api.Release(c.obj)
	c.live.Unlock()
	close(c.down)
}

func (c *Conn) opErr(op string, err error) error {
	if err == io.EOF {
		return err
	}
	return &net.OpError{Op: op, Net: "mptcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// LocalAddr is the effective local endpoint when the connection became
// ready.
func (c *Conn) LocalAddr() net.Addr {
	if c.local == nil {
		return &net.TCPAddr{}
	}
	return c.local
}

// RemoteAddr is the effective remote endpoint when the connection became
// ready.
func (c *Conn) RemoteAddr() net.Addr {
	if c.remote == nil {
		return &net.TCPAddr{}
	}
	return c.remote
}

// SetDeadline sets both deadlines; waiting Reads and Writes see it at once.
func (c *Conn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.readDL, c.writeDL = t, t
	c.signalLocked()
	return nil
}

// SetReadDeadline sets the read deadline.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.readDL = t
	c.signalLocked()
	return nil
}

// SetWriteDeadline sets the write deadline.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writeDL = t
	c.signalLocked()
	return nil
}

// Bytes the application wrote that the framework took, and read: stream
// bytes, not what the wire carried.
func (c *Conn) Bytes() (sent, received uint64) { return c.sent.Load(), c.received.Load() }

// Started is when the framework was asked to connect: a setup time from
// it leaves out building the parameters.
func (c *Conn) Started() time.Time { return c.started }

// State is the connection's last state.
func (c *Conn) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// Path reads the connection's current path.
func (c *Conn) Path() (PathInfo, error) {
	var (
		pi  PathInfo
		err = errors.New("no current path")
	)
	if !c.use(func() {
		if p := c.api.CopyCurrentPath(c.obj); p != 0 {
			pi, err = c.api.ReadPath(p), nil
			c.api.Release(p)
		}
	}) {
		return PathInfo{}, net.ErrClosed
	}
	return pi, err
}

// EstablishmentReport asks the framework how the connection was
// established; nil when it has no report or ctx ends first.
func (c *Conn) EstablishmentReport(ctx context.Context) *Report {
	ch := make(chan *Report, 1)
	if !c.use(func() { c.api.EstablishmentReport(c.obj, func(r *Report) { ch <- r }) }) {
		return nil
	}
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		return nil
	}
}
