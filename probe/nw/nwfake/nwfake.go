// Package nwfake stands in for Network.framework where there is none (the
// adapter's tests on Linux). Its connections are real TCP sockets (MPTCP
// when a multipath service is set and the kernel has it) and it calls back
// in the orders the framework documents: preparing, then ready, waiting or
// failed; every send and receive completion exactly once; cancelled last,
// after which nothing is called. Each connection has its own serial queue.
// It counts every object's references, so a test can say that all were
// given back, none twice and none used after its release.
package nwfake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/mptester/mptester/probe/nw"
)

// Outcome is how a connection's start ends, after preparing.
type Outcome int

const (
	// Connect dials the endpoint for real: ready, or waiting with the
	// errno when it fails (the framework waits on a refused connection).
	Connect Outcome = iota
	// Wait: waiting with Script.Err, as when no path is usable.
	Wait
	// Fail: failed with Script.Err.
	Fail
	// Hang stays preparing until cancelled.
	Hang
)

// Script says how the next connections behave.
type Script struct {
	Outcome Outcome
	Err     *nw.Error
}

// Fake is an nw.API.
type Fake struct {
	// Interfaces FindInterface knows.
	Interfaces []nw.Interface

	mu         sync.Mutex
	script     Script
	next       nw.Object
	objs       map[nw.Object]*object
	violations []string
	params     []Params
	conns      []*Conn
}

// Params is what NewParameters was given, read out.
type Params struct {
	Service   nw.Service
	Interface string
	Prohibit  []nw.InterfaceType
}

type object struct {
	kind string
	desc string
	refs int
	conn *Conn
	par  Params
	path nw.PathInfo
}

// New returns a fake whose connections connect for real.
func New() *Fake { return &Fake{objs: map[nw.Object]*object{}} }

// SetScript sets how connections started from now on behave.
func (f *Fake) SetScript(s Script) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script = s
}

func (f *Fake) violate(format string, a ...any) {
	f.violations = append(f.violations, fmt.Sprintf(format, a...))
}

// Violations are misuses seen: a release of an object not held, a call on
// a released object, a call after cancelled.
func (f *Fake) Violations() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.violations...)
}

// Leaks lists the objects still holding references.
func (f *Fake) Leaks() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for o, ob := range f.objs {
		if ob.refs > 0 {
			out = append(out, fmt.Sprintf("%s %s (#%d, %d refs)", ob.kind, ob.desc, o, ob.refs))
		}
	}
	sort.Strings(out)
	return out
}

// Created counts the objects created so far.
func (f *Fake) Created() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.objs)
}

// Params lists what every NewParameters call was given.
func (f *Fake) Params() []Params {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Params(nil), f.params...)
}

// Conns lists the connections created so far.
func (f *Fake) Conns() []*Conn {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*Conn(nil), f.conns...)
}

func (f *Fake) newLocked(kind, desc string) (nw.Object, *object) {
	f.next++
	ob := &object{kind: kind, desc: desc, refs: 1}
	f.objs[f.next] = ob
	return f.next, ob
}

// liveLocked returns the object o of kind, recording a violation when it
// is not held.
func (f *Fake) liveLocked(o nw.Object, kind, call string) *object {
	ob, ok := f.objs[o]
	switch {
	case !ok:
		f.violate("%s on unknown object #%d", call, o)
		return nil
	case ob.kind != kind:
		f.violate("%s on a %s, not a %s", call, ob.kind, kind)
		return nil
	case ob.refs <= 0:
		f.violate("%s on released %s %s", call, ob.kind, ob.desc)
		return nil
	}
	return ob
}

func (f *Fake) NewEndpoint(host, port string) (nw.Object, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, _ := f.newLocked("endpoint", net.JoinHostPort(host, port))
	return o, nil
}

func (f *Fake) FindInterface(name string) (nw.Object, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, i := range f.Interfaces {
		if i.Name == name {
			o, _ := f.newLocked("interface", name)
			return o, nil
		}
	}
	return 0, fmt.Errorf("no interface %s on the current path", name)
}

func (f *Fake) NewParameters(p nw.Params) (nw.Object, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rp := Params{Service: p.Service, Prohibit: append([]nw.InterfaceType(nil), p.Prohibit...)}
	if p.Interface != 0 {
		if ob := f.liveLocked(p.Interface, "interface", "require interface"); ob != nil {
			rp.Interface = ob.desc
		}
	}
	f.params = append(f.params, rp)
	o, ob := f.newLocked("parameters", fmt.Sprint(rp))
	ob.par = rp
	return o, nil
}

func (f *Fake) NewConnection(ep, params nw.Object) (nw.Object, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.liveLocked(ep, "endpoint", "nw_connection_create")
	p := f.liveLocked(params, "parameters", "nw_connection_create")
	if e == nil || p == nil {
		return 0, errors.New("bad arguments")
	}
	c := &Conn{f: f, addr: e.desc, par: p.par, script: f.script, q: newQueue(), wq: newQueue()}
	o, ob := f.newLocked("connection", e.desc)
	ob.conn = c
	f.conns = append(f.conns, c)
	return o, nil
}

// conn returns the live connection o (nil and a violation otherwise).
func (f *Fake) conn(o nw.Object, call string) *Conn {
	f.mu.Lock()
	defer f.mu.Unlock()
	ob := f.liveLocked(o, "connection", call)
	if ob == nil {
		return nil
	}
	return ob.conn
}

func (f *Fake) SetStateHandler(o nw.Object, fn func(nw.State, *nw.Error)) {
	if c := f.conn(o, "set state handler"); c != nil {
		c.mu.Lock()
		c.handler = fn
		c.mu.Unlock()
	}
}

func (f *Fake) Start(o nw.Object) {
	if c := f.conn(o, "start"); c != nil {
		c.start()
	}
}

func (f *Fake) Send(o nw.Object, data []byte, final bool, done func(*nw.Error)) {
	if c := f.conn(o, "send"); c != nil {
		c.send(append([]byte(nil), data...), final, done)
	}
}

func (f *Fake) Receive(o nw.Object, max int, fn func([]byte, bool, *nw.Error)) {
	if c := f.conn(o, "receive"); c != nil {
		c.receive(max, fn)
	}
}

func (f *Fake) Cancel(o nw.Object) {
	if c := f.conn(o, "cancel"); c != nil {
		c.cancel()
	}
}

func (f *Fake) CopyCurrentPath(o nw.Object) nw.Object {
	c := f.conn(o, "copy current path")
	if c == nil {
		return 0
	}
	pi, ok := c.pathInfo()
	if !ok {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ob := f.newLocked("path", c.addr)
	ob.path = pi
	return p
}

func (f *Fake) ReadPath(p nw.Object) nw.PathInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ob := f.liveLocked(p, "path", "read path"); ob != nil {
		return ob.path
	}
	return nw.PathInfo{}
}

func (f *Fake) EstablishmentReport(o nw.Object, fn func(*nw.Report)) {
	c := f.conn(o, "access establishment report")
	if c == nil {
		return
	}
	c.mu.Lock()
	r := c.report
	c.mu.Unlock()
	c.q.push(func() { fn(r) })
}

func (f *Fake) Release(o nw.Object) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ob, ok := f.objs[o]
	if !ok || ob.refs <= 0 {
		if ok {
			f.violate("release of released %s %s", ob.kind, ob.desc)
		} else {
			f.violate("release of unknown object #%d", o)
		}
		return
	}
	ob.refs--
}

// Conn is one fake connection.
type Conn struct {
	f      *Fake
	addr   string
	par    Params
	script Script
	q      *queue

	mu        sync.Mutex
	handler   func(nw.State, *nw.Error)
	sock      net.Conn
	report    *nw.Report
	failed    *nw.Error
	cancelled bool
	ops       sync.WaitGroup // sends and receives not completed
	wq        *queue         // runs the sends in order
	stopDial  context.CancelFunc
	over      bool // cancelled was delivered
	started   time.Time
}

func (c *Conn) state(s nw.State, err *nw.Error) {
	c.q.push(func() {
		c.mu.Lock()
		h := c.handler
		c.mu.Unlock()
		if h != nil {
			h(s, err)
		}
		if s == nw.StateCancelled {
			c.mu.Lock()
			c.over = true
			c.mu.Unlock()
		}
	})
}

// afterCancelled records a call made after cancelled was delivered.
func (c *Conn) afterCancelled(call string) bool {
	c.mu.Lock()
	over := c.over
	c.mu.Unlock()
	if over {
		c.f.mu.Lock()
		c.f.violate("%s after cancelled", call)
		c.f.mu.Unlock()
	}
	return over
}

func (c *Conn) start() {
	c.started = time.Now()
	c.state(nw.StatePreparing, nil)
	switch c.script.Outcome {
	case Wait:
		c.state(nw.StateWaiting, c.script.Err)
		return
	case Fail:
		c.state(nw.StateFailed, c.script.Err)
		return
	case Hang:
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	c.mu.Lock()
	c.stopDial = cancel
	c.mu.Unlock()
	c.ops.Add(1)
	go func() {
		defer c.ops.Done()
		defer cancel()
		var d net.Dialer
		d.SetMultipathTCP(c.par.Service != nw.ServiceDisabled)
		s, err := d.DialContext(ctx, "tcp", c.addr)
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.cancelled {
			if s != nil {
				s.Close()
			}
			return
		}
		if err != nil {
			c.state(nw.StateWaiting, posix(err))
			return
		}
		c.sock = s
		ms := uint64(time.Since(c.started).Milliseconds())
		c.report = &nw.Report{DurationMillis: ms, Protocols: []nw.ProtocolHandshake{{Name: "tcp", Millis: ms, RTTMillis: ms}}}
		c.state(nw.StateReady, nil)
	}()
}

// posix turns a socket error into the framework's POSIX error.
func posix(err error) *nw.Error {
	var errno syscall.Errno
	switch {
	case errors.As(err, &errno):
		return &nw.Error{Domain: nw.DomainPOSIX, Code: int(errno)}
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &nw.Error{Domain: nw.DomainPOSIX, Code: int(syscall.ETIMEDOUT)}
	}
	return &nw.Error{Domain: nw.DomainPOSIX, Code: int(syscall.EIO)}
}

var errCancelled = &nw.Error{Domain: nw.DomainPOSIX, Code: int(syscall.ECANCELED)}

// usable returns the socket, or the error a completion reports now.
func (c *Conn) usable() (net.Conn, *nw.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.cancelled:
		return nil, errCancelled
	case c.failed != nil:
		return nil, c.failed
	case c.sock == nil:
		return nil, &nw.Error{Domain: nw.DomainPOSIX, Code: int(syscall.ENOTCONN)}
	}
	return c.sock, nil
}

// opErr is what a socket error means: the cancellation or failure that
// closed it, else the socket's own.
func (c *Conn) opErr(err error) *nw.Error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.cancelled:
		return errCancelled
	case c.failed != nil:
		return c.failed
	}
	return posix(err)
}

func (c *Conn) send(data []byte, final bool, done func(*nw.Error)) {
	if c.afterCancelled("send") {
		return
	}
	c.ops.Add(1)
	c.wq.push(func() {
		defer c.ops.Done()
		s, e := c.usable()
		if e == nil && len(data) > 0 {
			if _, err := s.Write(data); err != nil {
				e = c.opErr(err)
			}
		}
		if e == nil && final {
			if cw, ok := s.(interface{ CloseWrite() error }); ok {
				if err := cw.CloseWrite(); err != nil {
					e = c.opErr(err)
				}
			}
		}
		c.q.push(func() { done(e) })
	})
}

func (c *Conn) receive(max int, fn func([]byte, bool, *nw.Error)) {
	if c.afterCancelled("receive") {
		return
	}
	c.ops.Add(1)
	go func() {
		defer c.ops.Done()
		s, e := c.usable()
		if e != nil {
			c.q.push(func() { fn(nil, false, e) })
			return
		}
		buf := make([]byte, max)
		n, err := s.Read(buf)
		var eof bool
		switch {
		case err == io.EOF:
			eof, e = true, nil
		case err != nil:
			e = c.opErr(err)
		}
		c.q.push(func() { fn(buf[:n], eof, e) })
	}()
}

// cancel closes the socket; the pending completions are called (with
// ECANCELED), then cancelled, and nothing after it.
func (c *Conn) cancel() {
	c.mu.Lock()
	if c.cancelled {
		c.mu.Unlock()
		return
	}
	c.cancelled = true
	if c.sock != nil {
		c.sock.Close()
	}
	if c.stopDial != nil {
		c.stopDial()
	}
	c.mu.Unlock()
	go func() {
		c.ops.Wait()
		c.wq.push(c.wq.stop)
		c.state(nw.StateCancelled, nil)
		c.q.push(c.q.stop)
	}()
}

// Fail injects a failure of an established connection (a reset, a lost
// path): failed with err, pending completions with err.
func (c *Conn) Fail(err *nw.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelled || c.failed != nil {
		return
	}
	c.failed = err
	if c.sock != nil {
		c.sock.Close()
	}
	c.state(nw.StateFailed, err)
}

// Waiting injects a waiting state after ready (the path was lost and the
// framework looks for another); the socket stays.
func (c *Conn) Waiting(err *nw.Error) { c.state(nw.StateWaiting, err) }

// Socket is the real socket under the connection (nil before ready).
func (c *Conn) Socket() net.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sock
}

// Params are the connection's parameters.
func (c *Conn) Params() Params { return c.par }

func (c *Conn) pathInfo() (nw.PathInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sock == nil {
		return nw.PathInfo{}, false
	}
	pi := nw.PathInfo{Status: nw.PathSatisfied, Interfaces: []nw.Interface{},
		Local:  c.sock.LocalAddr().(*net.TCPAddr).AddrPort(),
		Remote: c.sock.RemoteAddr().(*net.TCPAddr).AddrPort()}
	for _, i := range c.f.Interfaces {
		if c.par.Interface == "" || i.Name == c.par.Interface {
			pi.Interfaces = append(pi.Interfaces, i)
		}
	}
	return pi, true
}

// queue is a serial dispatch queue: functions run one at a time, in order.
type queue struct {
	mu      sync.Mutex
	fns     []func()
	wake    chan struct{}
	stopped bool
}

func newQueue() *queue {
	q := &queue{wake: make(chan struct{}, 1)}
	go q.run()
	return q
}

func (q *queue) push(f func()) {
	q.mu.Lock()
	q.fns = append(q.fns, f)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *queue) stop() { q.stopped = true }

func (q *queue) run() {
	for range q.wake {
		for {
			q.mu.Lock()
			if len(q.fns) == 0 {
				q.mu.Unlock()
				break
			}
			f := q.fns[0]
			q.fns = q.fns[1:]
			q.mu.Unlock()
			f()
			if q.stopped {
				q.drop()
				return
			}
		}
	}
}

// drop: after cancelled nothing is called; a function queued after it is
// a violation of the framework's order by this fake itself.
func (q *queue) drop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.fns = nil
}

// WaitIdle waits until every connection's pending work has called back
// (for tests that look at the state after the fact).
func (f *Fake) WaitIdle(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		for _, c := range f.Conns() {
			c.ops.Wait()
		}
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
