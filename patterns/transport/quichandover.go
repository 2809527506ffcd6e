package transport

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/mptester/mptester/probe"
)

// The quic-handover transport: one QUIC connection (quic-go) that starts
// on the primary path and moves to a backup path by QUIC connection
// migration (RFC 9000 §9: PATH_CHALLENGE/PATH_RESPONSE, then switching
// the path the client sends on) when the primary path fails, and back
// when the primary answers again.
//
// This is NOT multipath QUIC: quic-go has no IETF multipath, so exactly
// one path carries data at a time; the other is only probed. It stands in
// for MultipathTester's Multipath QUIC with cellular paths advertised as
// backup (000 §II-B): the backup is validated in advance and re-validated
// periodically, and the client switches when the primary shows the
// study's conditions, an RTO (QUIC: PTO) with nothing acknowledged since
// or data in flight for more than 600 ms. Every switch is recorded in the
// samples with its time, paths and cause. The server side is quic's own
// listener: quic-go's server follows a client that migrates (it validates
// the new address and moves once it sees non-probing packets there).
const (
	nameQUICHandover = "quic-handover"
	keyQUICHandover  = "quic_handover"
	// quicCodeNoBackup closes a connection whose primary path failed with
	// no backup to move to.
	quicCodeNoBackup = 0x10
)

func init() {
	Register(Descriptor{Name: nameQUICHandover, Order: 35,
		Help: "QUIC connection migration (quic-go): one path at a time, moving to the backup on a primary PTO or 600 ms in flight (000 §II-B); not multipath QUIC",
		// Byte counters are UDP payloads (whole QUIC packets), as quic's.
		Network: "udp", DefaultPort: 443, Multipath: true, Handover: true, ServedBy: nameQUIC, HeaderOverhead: 0.04,
		New: func(o Options) (Transport, error) {
			cfg, err := o.Handover.withDefaults()
			if err != nil {
				return nil, err
			}
			return &handoverTransport{o: o, cfg: cfg}, nil
		},
		Summarise: summariseHandover})
}

// HandoverConfig says when quic-handover leaves and returns to its
// primary path. Zero fields take the defaults.
type HandoverConfig struct {
	// PTOs: switch once the primary's oldest unacknowledged data has
	// waited this many probe timeouts in a row, backoff included (000
	// §II-B condition 2: an RTO with nothing acknowledged since; see
	// pathMetrics.inTimeout). Default 1.
	PTOs int
	// MinTimeout is the least a probe timeout counts for in that rule:
	// the 200 ms minimum RTO of the gQUIC-era quic-go that 000's mp-quic
	// was built on (RFC 9002's PTO has none, and on a 20 ms path it is
	// ~50 ms: a late ack would make the connection leave a healthy path).
	// Default 200 ms.
	MinTimeout time.Duration
	// InFlight: switch once data has been in flight unacknowledged this
	// long on the primary (000 §II-B: 600 ms). Default 600 ms.
	InFlight time.Duration
	// Reprobe is how often the backup is re-validated while on the
	// primary, and the primary probed while on the backup. Default 1 s.
	Reprobe time.Duration
	// ProbeTimeout bounds one path validation. Default 1 s.
	ProbeTimeout time.Duration
	// Hold is the least time on the backup before switching back, so a
	// spurious timeout does not make the connection flap. Default 1 s.
	Hold time.Duration
	// NoBackup is how long the primary may stay failed with no usable
	// backup before the connection is given up (StatusNetworkChanged)
	// instead of waiting for the idle timeout. Default 5 s.
	NoBackup time.Duration
}

// DefaultHandover is the configuration of 000 §II-B.
var DefaultHandover = HandoverConfig{PTOs: 1, MinTimeout: 200 * time.Millisecond, InFlight: 600 * time.Millisecond, Reprobe: time.Second,
	ProbeTimeout: time.Second, Hold: time.Second, NoBackup: 5 * time.Second}

// check is the interval of the switching rule's in-flight check (the PTO
// condition is evaluated the moment quic-go reports the timeout).
const handoverCheck = 10 * time.Millisecond

func (c HandoverConfig) withDefaults() (HandoverConfig, error) {
	if c.PTOs < 0 || c.MinTimeout < 0 || c.InFlight < 0 || c.Reprobe < 0 || c.ProbeTimeout < 0 || c.Hold < 0 || c.NoBackup < 0 {
		return c, fmt.Errorf("quic-handover: negative setting in %+v", c)
	}
	d := DefaultHandover
	if c.PTOs == 0 {
		c.PTOs = d.PTOs
	}
	for _, f := range []struct{ v, d *time.Duration }{{&c.MinTimeout, &d.MinTimeout}, {&c.InFlight, &d.InFlight}, {&c.Reprobe, &d.Reprobe},
		{&c.ProbeTimeout, &d.ProbeTimeout}, {&c.Hold, &d.Hold}, {&c.NoBackup, &d.NoBackup}} {
		if *f.v == 0 {
			*f.v = *f.d
		}
	}
	return c, nil
}

// Causes of a switch.
const (
	CausePTO      = "pto"              // 000 §II-B: an RTO (PTO) on the primary, nothing acked since
	CauseInFlight = "in-flight"        // 000 §II-B: data in flight for longer than the threshold
	CauseAnswered = "primary-answered" // the primary validated again while on the backup
	CauseGone     = "path-gone"        // a send on the primary failed: the host has no route or link for it
)

// Handover statuses of a connection.
const (
	HandoverNoBackup     = "no-backup"          // no second path was selected
	HandoverBackupFailed = "backup-unavailable" // the backup path could not be set up
	HandoverReady        = "backup-ready"       // a backup path is configured
	HandoverGaveUp       = "primary-lost-no-backup"
)

// HandoverSwitch is one change of the path in use.
type HandoverSwitch struct {
	// At is the wall-clock time of the switch, T the time since the
	// connection was set up.
	At   time.Time     `json:"at"`
	T    time.Duration `json:"t_ns"`
	From string        `json:"from"`
	To   string        `json:"to"` // "" when there was nowhere to go (HandoverGaveUp)
	// Cause: CausePTO, CauseInFlight, CauseGone or CauseAnswered.
	Cause string `json:"cause"`
	// What the old path showed at the decision: its timeouts in
	// progress (PathState.RTOs) and the age of its oldest unacknowledged
	// data.
	PTOs     uint32        `json:"ptos"`
	InFlight time.Duration `json:"in_flight_age_ns"`
	// Wait is how long the switch waited for a backup re-validation in
	// progress.
	Wait time.Duration `json:"wait_ns,omitempty"`
	// Error: why there was nowhere to go.
	Error string `json:"error,omitempty"`
}

// QUICHandoverStatus is the connection's fact: its backup as set up.
type QUICHandoverStatus struct {
	Backup string `json:"backup,omitempty"`
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

// Key of the fact.
func (*QUICHandoverStatus) Key() string { return keyQUICHandover }

// QUICHandoverState is one sample: quic-go's connection counters, each
// path's state and every switch so far.
type QUICHandoverState struct {
	Conn     QUICStats        `json:"conn"`
	Active   string           `json:"active"`
	Status   string           `json:"status"`
	Paths    []PathState      `json:"paths"`
	Switches []HandoverSwitch `json:"switches"`
}

// Bytes: the UDP payloads (QUIC packets) of every path.
func (s *QUICHandoverState) Bytes() (sent, received uint64) {
	for _, p := range s.Paths {
		sent += p.Sent
		received += p.Received
	}
	return sent, received
}

// Retransmissions: QUIC packets declared lost.
func (s *QUICHandoverState) Retransmissions() uint64 { return s.Conn.PacketsLost }

// PathStates implements PathStater.
func (s *QUICHandoverState) PathStates() []PathState { return s.Paths }

// PerPath implements PathSampler: the bytes each path carried.
func (s *QUICHandoverState) PerPath() []PathCounters {
	out := make([]PathCounters, 0, len(s.Paths))
	for _, p := range s.Paths {
		out = append(out, PathCounters{Path: p.Path, Local: p.Local, Remote: p.Remote, Sent: p.Sent, Received: p.Received})
	}
	return out
}

// QUICHandoverSummary is the record's transport summary.
type QUICHandoverSummary struct {
	Status   string           `json:"status"`
	Switches []HandoverSwitch `json:"switches"`
	Paths    []PathCounters   `json:"path_bytes"`
}

// Key of the summary.
func (*QUICHandoverSummary) Key() string { return keyQUICHandover }

func summariseHandover(conns []ConnSamples) Fact {
	sum := &QUICHandoverSummary{Switches: []HandoverSwitch{}, Paths: []PathCounters{}}
	for _, c := range conns {
		if st, ok := c.Info.Facts.(*QUICHandoverStatus); ok && sum.Status == "" {
			sum.Status = st.Status
		}
		var last *QUICHandoverState
		for _, s := range c.Samples {
			if h, ok := s.Data.(*QUICHandoverState); ok {
				last = h
			}
		}
		if last == nil {
			continue
		}
		if last.Status == HandoverGaveUp || sum.Status == "" {
			sum.Status = last.Status
		}
		sum.Switches = append(sum.Switches, last.Switches...)
		sum.Paths = append(sum.Paths, last.PerPath()...)
	}
	if len(conns) == 0 {
		return nil
	}
	return sum
}

type handoverTransport struct {
	o   Options
	cfg HandoverConfig
}

func (t *handoverTransport) Name() string { return nameQUICHandover }

// backup is the path quic-handover moves to: the first other path marked
// backup, else the first other path.
func (t *handoverTransport) backup() (PathRole, bool) {
	for _, p := range t.o.Paths[1:] {
		if p.Role == RoleBackup {
			return p, true
		}
	}
	if len(t.o.Paths) > 1 {
		return t.o.Paths[1], true
	}
	return PathRole{}, false
}

func (t *handoverTransport) Dial(ctx context.Context, addr netip.AddrPort, family string) (Conn, error) {
	start := time.Now()
	f := probe.Family4
	if addr.Addr().Unmap().Is6() {
		f = probe.Family6
	}
	c := &handoverConn{cfg: t.cfg, remote: addr, mon: newPathMonitor(), kick: make(chan struct{}, 1),
		validated: make(chan struct{}, 1), reprobe: make(chan struct{}, 1), stop: make(chan struct{})}
	c.mon.onPTO = func(n uint32) {
		if int(n) >= t.cfg.PTOs {
			signal(c.kick)
		}
	}
	primary := &hoPath{name: t.o.Paths[0].Name}
	c.paths = append(c.paths, primary)
	tr, err := c.openTransport(ctx, primary, t.o.Primary(), f)
	if err != nil {
		return nil, wrap(opConnect, fmt.Errorf("quic socket: %w", err), nil)
	}
	primary.local = primary.qpLocal
	c.mon.tuple("", primary.local)
	cfg := t.o.TLS.Clone()
	cfg.NextProtos = offered(family, []string{alpnH3})
	qcfg := QUICConfig(t.o.IdleTimeout)
	qcfg.Tracer = quicTracer(t.o.QlogDir, teeTrace{c.mon, &c.drops})
	qc, err := dialQUICGo(ctx, tr, addr, cfg, qcfg)
	if err != nil {
		c.closeTransports()
		return nil, wrap(opQUICHandshake, err, quicSetupStatus)
	}
	c.qc, c.start = qc, time.Now()
	c.info = Info{Transport: nameQUICHandover, Local: qc.LocalAddr().String(), Remote: qc.RemoteAddr().String(),
		ALPN: qc.ConnectionState().TLS.NegotiatedProtocol, Setup: time.Since(start)}
	fact := &QUICHandoverStatus{Status: HandoverNoBackup}
	if b, ok := t.backup(); ok {
		fact.Backup, fact.Status = b.Name, HandoverReady
		if err := c.addBackup(ctx, b.Path, t.o.Primary(), f); err != nil {
			fact.Status, fact.Error = HandoverBackupFailed, err.Error()
		}
	}
	c.status = fact.Status
	c.info.Facts = fact
	c.wg.Add(1)
	go c.run()
	return c, nil
}

// addBackup opens the backup path's socket and, for the way back, a
// second socket on the primary (the handshake path has no quic.Path
// handle to switch back to).
func (c *handoverConn) addBackup(ctx context.Context, backup, primary probe.Path, f probe.Family) error {
	b := &hoPath{name: backup.Name}
	tr, err := c.openTransport(ctx, b, backup, f)
	if err != nil {
		return err
	}
	if b.qp, err = c.qc.AddPath(tr); err != nil {
		return err
	}
	b.local = b.qpLocal
	p := c.paths[0]
	tr, err = c.openTransport(ctx, p, primary, f)
	if err != nil {
		return err
	}
	if p.qp, err = c.qc.AddPath(tr); err != nil {
		return err
	}
	c.paths = append(c.paths, b)
	return nil
}

// openTransport binds a UDP socket to path pp for p. The socket is quic-go's
// own *net.UDPConn (GSO, batched reads): its bytes are counted from the
// connection's qlog events (pathMonitor), by local address.
func (c *handoverConn) openTransport(ctx context.Context, p *hoPath, pp probe.Path, f probe.Family) (*quic.Transport, error) {
	if err := probe.CheckTarget(ctx, pp, c.remote.Addr()); err != nil {
		return nil, err
	}
	udp, err := probe.ListenUDP(ctx, pp, f)
	if err != nil {
		return nil, err
	}
	tr := &quic.Transport{Conn: &deadPathConn{UDPConn: udp, onDead: func() {
		c.mu.Lock()
		p.goneAt = time.Now()
		c.mu.Unlock()
		signal(c.kick)
	}}}
	c.trs = append(c.trs, tr)
	p.qpLocal = netip.MustParseAddrPort(udp.LocalAddr().String())
	p.locals = append(p.locals, p.qpLocal)
	return tr, nil
}

// hoPath is one path of a handover connection.
type hoPath struct {
	name string
	qp   *quic.Path // nil for the primary of a connection without backup
	// locals are the addresses of the path's sockets; qpLocal is qp's.
	locals  []netip.AddrPort
	qpLocal netip.AddrPort
	// Under handoverConn.mu: the socket in use (or last used), the state
	// when the path was last left (quic-go keeps RTT and loss state for
	// the active path only).
	local netip.AddrPort
	left  pathMetrics
	// goneAt: the last send on one of the path's sockets that the host
	// refused (no route, link down, address gone).
	goneAt time.Time
	// answered: the start of the last probe the path answered (zero:
	// its last probe failed or it was left since).
	answered time.Time
	probes   int
}

type handoverConn struct {
	qc     *quic.Conn
	cfg    HandoverConfig
	remote netip.AddrPort
	mon    *pathMonitor
	drops  queueDrops
	start  time.Time
	info   Info
	trs    []*quic.Transport
	rt     *http3.ClientConn

	kick      chan struct{} // the controller re-evaluates now
	validated chan struct{} // a validation succeeded
	reprobe   chan struct{} // the prober validates the path not in use now
	stop      chan struct{}
	wg        sync.WaitGroup
	closed    sync.Once
	gaveUp    atomic.Bool

	mu       sync.Mutex
	paths    []*hoPath // primary, then the backup if any
	active   int
	since    time.Time // when the active path became active
	failedAt time.Time // when the primary failed with nowhere to go
	switches []HandoverSwitch
	status   string
	// switchErr is why the last switch failed (quic-go's error).
	switchErr string
}

// run is the controller: it applies the switching rule and keeps the
// standby path validated.
func (c *handoverConn) run() {
	defer c.wg.Done()
	ctx, cancel := context.WithCancel(c.qc.Context())
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	c.mu.Lock()
	c.since = c.start
	hasBackup := len(c.paths) > 1
	c.mu.Unlock()
	if hasBackup {
		c.wg.Add(1)
		go c.prober(ctx)
	}
	tick := time.NewTicker(handoverCheck)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		case <-tick.C:
		}
		c.decide(ctx)
	}
}

// decide applies the rule once.
func (c *handoverConn) decide(ctx context.Context) {
	now := time.Now()
	c.mu.Lock()
	active, hasBackup := c.active, len(c.paths) > 1
	c.mu.Unlock()
	if active == 0 {
		m := c.mon.snapshot(now)
		c.mu.Lock()
		gone := c.paths[0].goneAt.After(c.since)
		c.mu.Unlock()
		cause := ""
		switch {
		case gone:
			// The host itself says the primary is gone (the kernel's
			// link-down or route removal): no timeout to wait for.
			cause = CauseGone
		case m.inTimeout(c.cfg.PTOs, c.cfg.MinTimeout):
			cause = CausePTO
		case m.inFlightAge > c.cfg.InFlight:
			cause = CauseInFlight
		}
		if cause == "" {
			c.mu.Lock()
			c.failedAt = time.Time{}
			c.mu.Unlock()
			return
		}
		if hasBackup && c.switchTo(ctx, 1, cause, m) {
			return
		}
		c.mu.Lock()
		if c.failedAt.IsZero() {
			c.failedAt = now
		}
		giveUp := now.Sub(c.failedAt) >= c.cfg.NoBackup
		c.mu.Unlock()
		if giveUp {
			c.giveUp(cause, m)
		}
		return
	}
	c.mu.Lock()
	// Back only on an answer to a probe sent after the hold: an older
	// answer may predate the failure that made the connection leave.
	back := !c.paths[0].answered.IsZero() && c.paths[0].answered.Sub(c.since) >= c.cfg.Hold
	c.mu.Unlock()
	if back {
		c.switchTo(ctx, 0, CauseAnswered, c.mon.snapshot(now))
	}
}

// switchTo moves the connection to path i. A backup in the middle of a
// re-validation (quic-go unvalidates a path while it is probed again) is
// waited for, at most ProbeTimeout.
func (c *handoverConn) switchTo(ctx context.Context, i int, cause string, m pathMetrics) bool {
	c.mu.Lock()
	p := c.paths[i]
	c.mu.Unlock()
	start := time.Now()
	var wait <-chan time.Time
	for {
		err := p.qp.Switch()
		if err == nil {
			break
		}
		if !errors.Is(err, quic.ErrPathNotValidated) {
			c.mu.Lock()
			c.switchErr = err.Error()
			c.mu.Unlock()
			return false
		}
		if wait == nil {
			t := time.NewTimer(c.cfg.ProbeTimeout)
			defer t.Stop()
			wait = t.C
		}
		select {
		case <-c.validated:
		case <-wait:
			c.mu.Lock()
			c.switchErr = fmt.Sprintf("%s not validated within %v", p.name, c.cfg.ProbeTimeout)
			c.mu.Unlock()
			return false
		case <-ctx.Done():
			return false
		}
	}
	now := time.Now()
	c.mu.Lock()
	old := c.paths[c.active]
	old.left = m
	c.switches = append(c.switches, HandoverSwitch{At: now, T: now.Sub(c.start), From: old.name, To: p.name,
		Cause: cause, PTOs: m.rtos(c.cfg.MinTimeout), InFlight: m.inFlightAge, Wait: now.Sub(start)})
	c.active, c.since, c.failedAt = i, now, time.Time{}
	p.local = p.qpLocal
	old.answered = time.Time{} // to be probed again before it is used
	c.mu.Unlock()
	// quic-go's run loop applies a switch when it next wakes (the monitor
	// resets then); the prober validating the path just left (which it
	// does next anyway) wakes it.
	signal(c.reprobe)
	return true
}

// giveUp ends a connection whose primary failed with no backup to use,
// with a status instead of a wait for the idle timeout.
func (c *handoverConn) giveUp(cause string, m pathMetrics) {
	if !c.gaveUp.CompareAndSwap(false, true) {
		return
	}
	now := time.Now()
	c.mu.Lock()
	c.status = HandoverGaveUp
	reason := "no backup path"
	if len(c.paths) > 1 {
		reason = cmp.Or(c.switchErr, "backup path unusable")
	}
	c.switches = append(c.switches, HandoverSwitch{At: now, T: now.Sub(c.start), From: c.paths[0].name,
		Cause: cause, PTOs: m.rtos(c.cfg.MinTimeout), InFlight: m.inFlightAge, Error: reason})
	c.mu.Unlock()
	_ = c.qc.CloseWithError(quicCodeNoBackup, "primary path lost and no backup path")
}

// signal wakes the receiver of ch without waiting.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// prober validates the path not in use: the backup every Reprobe while
// on the primary (so it is known good before it is needed, as 000 §II-B's
// backup), the primary every Reprobe while on the backup (so the
// connection returns when it answers).
func (c *handoverConn) prober(ctx context.Context) {
	defer c.wg.Done()
	for {
		c.mu.Lock()
		p := c.paths[1-c.active]
		c.mu.Unlock()
		sent := time.Now()
		pctx, cancel := context.WithTimeout(ctx, c.cfg.ProbeTimeout)
		err := p.qp.Probe(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		c.mu.Lock()
		p.probes++
		p.answered = time.Time{}
		if err == nil && p != c.paths[c.active] {
			p.answered = sent
		}
		c.mu.Unlock()
		if err == nil {
			signal(c.validated)
			signal(c.kick)
		}
		t := time.NewTimer(c.cfg.Reprobe)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-c.reprobe:
			t.Stop()
		}
	}
}

func (c *handoverConn) status4(err error) Status {
	if c.gaveUp.Load() {
		return StatusNetworkChanged
	}
	return quicStatus(err)
}

func (c *handoverConn) OpenStream(ctx context.Context) (Stream, error) {
	s, err := c.qc.OpenStreamSync(ctx)
	if err != nil {
		return nil, wrap("open stream", err, c.status4)
	}
	return classified{Stream: quicStream{s}, own: c.status4}, nil
}

func (c *handoverConn) MultiStream() bool { return true }

func (c *handoverConn) RoundTripper() http.RoundTripper {
	if c.rt == nil {
		c.rt = (&http3.Transport{DisableCompression: true}).NewClientConn(c.qc)
	}
	return classifiedRT{rt: c.rt, own: c.status4}
}

func (c *handoverConn) Info() Info { return c.info }

// Sample: the active path's RTT and loss state is quic-go's (from its
// qlog events); a path not in use shows its state as it was left.
func (c *handoverConn) Sample() State {
	s := sampleQUIC(c.qc, &c.drops, nil).Data.(*QUICStats)
	m := c.mon.snapshot(time.Now())
	c.mu.Lock()
	defer c.mu.Unlock()
	st := &QUICHandoverState{Conn: *s, Active: c.paths[c.active].name, Status: c.status,
		Switches: append([]HandoverSwitch{}, c.switches...)}
	for i, p := range c.paths {
		pm := p.left
		if i == c.active {
			pm = m
		}
		sent, recv := c.mon.bytes(p.locals)
		st.Paths = append(st.Paths, PathState{Path: p.name, Local: p.local, Remote: c.remote,
			Backup: i > 0, Active: i == c.active, SRTT: pm.srtt, RTO: pm.pto(), RTOs: pm.rtos(c.cfg.MinTimeout),
			InFlight: pm.inFlight, Sent: sent, Received: recv})
	}
	return State{Key: keyQUICHandover, Data: st}
}

func (c *handoverConn) Close() error {
	err := c.qc.CloseWithError(0, "")
	c.closed.Do(func() { close(c.stop) })
	c.wg.Wait()
	c.closeTransports()
	return err
}

func (c *handoverConn) closeTransports() {
	for _, tr := range c.trs {
		tr.Close()
		tr.Conn.Close()
	}
}
