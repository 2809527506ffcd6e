package patterns

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/mptester/mptester/mpquic"
	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/probe/nw"
)

// RunOptions of a stable-network run (000 §II-A "stable network mode").
type RunOptions struct {
	Servers []string // HOST[:PORT]; a port overrides Ports
	// Ports of the server per listening transport (transport.Listeners);
	// a missing one is the transport's default port.
	Ports      map[string]uint16
	Patterns   []string
	Transports []string
	Paths      []probe.Path
	// Backup names the paths a multipath transport uses only as backups
	// (transport.RoleBackup); the others are available, the first of them
	// primary.
	Backup   []string
	Families []probe.Family
	Params   Params
	Seed     int64
	Pace     time.Duration // pause between tests
	Timeout  time.Duration // per test; 0 = derived from the pattern
	// ConnectTimeout bounds each connect and handshake (0: only Timeout).
	ConnectTimeout time.Duration
	// StallTimeout ends an HTTP transfer that receives nothing for this
	// long (0: DefaultStallTimeout).
	StallTimeout time.Duration
	// Stable watches the paths and invalidates the run when they change.
	Stable    bool
	Discover  func(ctx context.Context) ([]probe.Path, error)
	PollEvery time.Duration
	// TLS returns the client TLS configuration for a server name.
	TLS    func(serverName string) (*tls.Config, error)
	HTTP1  bool
	Logger *slog.Logger
	// QlogDir, when set, receives a qlog trace per QUIC connection.
	QlogDir string
	// MPTCPService is the multipath service of mptcp on macOS (0: default).
	MPTCPService nw.Service
	// MPQUICCongestion is mpquic's congestion control (empty: CUBIC).
	MPQUICCongestion mpquic.CongestionControl
	// QUICECN records quic-go's ECN per connection (transport.Options).
	QUICECN bool
	// AltPorts: a listener's alternate port the diagnosis of a failed
	// UDP handshake tries (missing: the transport's AltPort; 0: none).
	AltPorts map[string]uint16
	// Emit receives every record as it is produced.
	Emit func(rec any) error
	// Check, when set, may relabel a test's record before it is emitted
	// and counted (the run command marks a test whose traffic did not
	// take its path).
	Check func(rec *Record)
}

// ServerProbe is the ping of one candidate server (000 §II-A: the ping
// pattern selects the server).
type ServerProbe struct {
	Server   string         `json:"server"`
	Addr     netip.AddrPort `json:"addr"`
	Status   Status         `json:"status"`
	Error    string         `json:"error,omitempty"`
	Median   time.Duration  `json:"median_ns"`
	Answered int            `json:"answered"`
	Sent     int            `json:"sent"`
}

// SelectionRecord is the "server_selection" record of a run.
type SelectionRecord struct {
	Type     string        `json:"type"`
	Rule     string        `json:"rule"`
	Probes   []ServerProbe `json:"probes"`
	Selected string        `json:"selected"`
}

// RunSummary is how a run ended.
type RunSummary struct {
	Selected string
	Seed     int64
	Tests    int
	Failed   []Record
	All      []Record
	Invalid  bool
	Reason   string
}

// DefaultTimeout of a test: the pattern's own duration plus room for
// setup, ack grace and a slow path.
func DefaultTimeout(pattern string, p Params) time.Duration {
	p = p.WithDefaults(pattern)
	switch pattern {
	case "ping":
		return time.Duration(p.PingCount)*p.PingGap + 15*time.Second
	case "bulk":
		return 120 * time.Second
	case "iperf":
		return 2*p.Duration + 20*time.Second
	case "interactive":
		return p.Duration + p.AckGrace + 20*time.Second
	}
	return 60 * time.Second
}

type test struct {
	pattern, transport string
	path               probe.Path           // the primary path
	paths              []transport.PathRole // every path the test may use, primary first
	family             probe.Family
	unresolved         error // the server's name did not resolve on path
}

// Run selects the server and runs the pattern x transport x path x family
// matrix in a random order (seed recorded), pacing between tests.
func Run(ctx context.Context, o RunOptions) (RunSummary, error) {
	sum := RunSummary{Seed: o.Seed}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Emit == nil {
		o.Emit = func(any) error { return nil }
	}
	if len(o.Paths) == 0 || len(o.Families) == 0 || len(o.Servers) == 0 {
		return sum, errors.New("run: need at least one server, path and family")
	}
	sel, err := resolveAndSelect(ctx, o)
	if err != nil {
		return sum, err
	}
	sum.Selected = sel.name
	if o.QlogDir != "" {
		defer func() { // last: after every connection closed
			if err := waitQlogs(ctx); err != nil {
				o.Logger.Warn("qlog traces may be incomplete", "err", err)
			}
		}()
	}

	// A single-path transport gets one row per path; a multipath one a
	// row per family that spans every usable path.
	var tests []test
	for _, f := range o.Families {
		var usable, unresolved []probe.Path
		var unresolvedErr []error
		for _, p := range o.Paths {
			if err := sel.unresolved(p); err != nil {
				unresolved, unresolvedErr = append(unresolved, p), append(unresolvedErr, err)
				continue
			}
			if _, ok := sel.addr(p, f); !ok {
				o.Logger.Warn("server has no address of this family on this path; skipped", "server", sel.name, "path", p.Name, "family", int(f))
				continue
			}
			if _, ok := p.SourceAddr(f); !ok {
				o.Logger.Warn("path has no address of this family; skipped", "path", p.Name, "family", int(f))
				continue
			}
			usable = append(usable, p)
		}
		for _, tr := range o.Transports {
			d, err := transport.Get(tr)
			if err != nil {
				return sum, err
			}
			for _, pat := range o.Patterns {
				if p, err := Get(pat); err == nil && !d.Carries(p.Family()) {
					continue
				}
				add := func(primary probe.Path, span []probe.Path, err error) {
					paths := roles(o, primary, span)
					tests = append(tests, test{pattern: pat, transport: tr, path: paths[0].Path, paths: paths, family: f, unresolved: err})
				}
				if d.Multipath && len(usable) > 0 {
					add(primaryOf(o, usable), usable, nil)
					continue
				}
				for i, p := range unresolved {
					if !d.Multipath || i == 0 {
						add(p, nil, unresolvedErr[i])
					}
				}
				if !d.Multipath {
					for _, p := range usable {
						add(p, usable, nil)
					}
				}
			}
		}
	}
	if len(tests) == 0 {
		return sum, errors.New("run: no path has an address of a family the server has")
	}
	// 000 §II-A: the order is randomized to avoid traffic correlation.
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x6d70746573746572))
	rng.Shuffle(len(tests), func(i, j int) { tests[i], tests[j] = tests[j], tests[i] })

	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	diag := newDiagnoser(o, sel)
	if o.Stable && o.Discover != nil {
		go watchPaths(runCtx, o, stopRun)
	}
	for i, t := range tests {
		if i > 0 && o.Pace > 0 {
			select {
			case <-runCtx.Done():
			case <-time.After(o.Pace):
			}
		}
		if runCtx.Err() != nil {
			break
		}
		rec := runOne(runCtx, o, sel, t)
		rec.Index = i
		rec.Cause = diag.cause(runCtx, t, &rec)
		if o.Check != nil {
			o.Check(&rec)
		}
		sum.Tests++
		if err := o.Emit(rec); err != nil {
			return sum, err
		}
		sum.All = append(sum.All, rec)
		if rec.Status != StatusSuccess {
			sum.Failed = append(sum.Failed, rec)
		}
		o.Logger.Info("test", "n", i+1, "of", len(tests), "pattern", t.pattern, "transport", t.transport,
			"path", t.path.Name, "family", int(t.family), "status", rec.Status, "cause", rec.Cause, "error", rec.Error)
		if rec.Invalid {
			break
		}
	}
	if cause := context.Cause(runCtx); errors.Is(cause, ErrNetworkChanged) {
		sum.Invalid, sum.Reason = true, cause.Error()
	} else if ctx.Err() != nil {
		return sum, ctx.Err()
	}
	return sum, nil
}

func runOne(ctx context.Context, o RunOptions, sv server, t test) Record {
	ip, _ := sv.addr(t.path, t.family)
	port := sv.portFor(o, t.transport)
	cfg := TestConfig{Pattern: t.pattern, Transport: t.transport, Path: t.path.Name, Paths: configPaths(t.paths), Family: int(t.family),
		Server: netip.AddrPortFrom(ip, port), Params: o.Params, Timeout: o.Timeout, ServerResolution: sv.resolution(t.path, t.family),
		ConnectTimeout: o.ConnectTimeout, StallTimeout: o.StallTimeout}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout(t.pattern, o.Params)
	}
	err := t.unresolved
	var tr transport.Transport
	if err == nil {
		tr, err = newTransport(o, sv, t.transport, t.paths, t.family)
	}
	if err != nil {
		now := time.Now().UTC()
		return Record{Type: RecordType, Config: cfg, StartedAt: now, FinishedAt: now, Status: Classify(ctx, err),
			Error: err.Error(), Connections: []ConnRecord{}, PathBytes: []PathBytes{}}
	}
	return RunTest(ctx, tr, cfg, pathNames(o.Paths), o.Logger)
}

func pathNames(ps []probe.Path) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

func newTransport(o RunOptions, sv server, name string, paths []transport.PathRole, f probe.Family) (transport.Transport, error) {
	tlsCfg, err := o.TLS(sv.host)
	if err != nil {
		return nil, err
	}
	return transport.New(name, transport.Options{Paths: paths, Family: f, TLS: tlsCfg, HTTP1: o.HTTP1, QlogDir: o.QlogDir, MPTCPService: o.MPTCPService, MPQUICCongestion: o.MPQUICCongestion, QUICECN: o.QUICECN})
}

// primaryOf is the first path that is not a backup (the first path when
// all are).
func primaryOf(o RunOptions, ps []probe.Path) probe.Path {
	for _, p := range ps {
		if !slices.Contains(o.Backup, p.Name) {
			return p
		}
	}
	return ps[0]
}

// roles orders the paths a test may use: primary first, then the others
// of span as backup or available.
func roles(o RunOptions, primary probe.Path, span []probe.Path) []transport.PathRole {
	out := []transport.PathRole{{Path: primary, Role: transport.RolePrimary}}
	for _, p := range span {
		if p.Name == primary.Name {
			continue
		}
		r := transport.RoleAvailable
		if slices.Contains(o.Backup, p.Name) {
			r = transport.RoleBackup
		}
		out = append(out, transport.PathRole{Path: p, Role: r})
	}
	return out
}

func configPaths(ps []transport.PathRole) []PathRole {
	out := make([]PathRole, 0, len(ps))
	for _, p := range ps {
		out = append(out, PathRole{Name: p.Name, Role: p.Role})
	}
	return out
}

// portFor is the server's port for a transport: HOST:PORT's port, else the
// port given for the transport's listener, else its default.
func (sv server) portFor(o RunOptions, name string) uint16 {
	if sv.port != 0 {
		return sv.port
	}
	d, err := transport.Get(name)
	if err != nil {
		return 0
	}
	if p := o.Ports[d.Listener()]; p != 0 {
		return p
	}
	if ld, err := transport.Get(d.Listener()); err == nil {
		return ld.DefaultPort
	}
	return d.DefaultPort
}

// resolveAndSelect resolves every server on the paths and selects one.
func resolveAndSelect(ctx context.Context, o RunOptions) (server, error) {
	var servers []server
	for _, s := range o.Servers {
		sv, err := parseServer(ctx, o, s)
		if err != nil {
			return server{}, err
		}
		servers = append(servers, sv)
	}
	return selectServer(ctx, o, servers)
}

// selectServer pings every candidate over the first path, family and
// transport and keeps the lowest median among those that answered every
// ping (the reference app's rule).
func selectServer(ctx context.Context, o RunOptions, servers []server) (server, error) {
	if len(servers) == 1 {
		return servers[0], nil
	}
	rec := SelectionRecord{Type: "server_selection", Rule: "lowest median ping among servers that answered every ping", Probes: []ServerProbe{}}
	trName := transport.Names()[0]
	if len(o.Transports) > 0 {
		trName = o.Transports[0]
	}
	best, bestMedian := -1, time.Duration(0)
	for i, sv := range servers {
		sp := ServerProbe{Server: sv.name}
		f := o.Families[0]
		ip, ok := sv.addr(o.Paths[0], f)
		if !ok {
			sp.Status, sp.Error = StatusUnreachable, fmt.Sprintf("no IPv%d address", f)
			rec.Probes = append(rec.Probes, sp)
			continue
		}
		sp.Addr = netip.AddrPortFrom(ip, sv.portFor(o, trName))
		tr, err := newTransport(o, sv, trName, roles(o, o.Paths[0], nil), f)
		if err != nil {
			return server{}, err
		}
		r := RunTest(ctx, tr, TestConfig{Pattern: "ping", Transport: trName, Path: o.Paths[0].Name, Family: int(f),
			Server: sp.Addr, Params: o.Params, Timeout: DefaultTimeout("ping", o.Params), ConnectTimeout: o.ConnectTimeout}, nil, o.Logger)
		sp.Status, sp.Error = r.Status, r.Error
		if pr, ok := r.Result.(*PingResult); ok {
			sp.Median, sp.Answered, sp.Sent = pr.Median, pr.Answered, pr.Sent
		}
		rec.Probes = append(rec.Probes, sp)
		if r.Status == StatusSuccess && sp.Answered == sp.Sent && (best < 0 || sp.Median < bestMedian) {
			best, bestMedian = i, sp.Median
		}
	}
	if best >= 0 {
		rec.Selected = servers[best].name
	}
	if err := o.Emit(rec); err != nil {
		return server{}, err
	}
	if best < 0 {
		return server{}, fmt.Errorf("no server answered every ping: %s", probeSummary(rec.Probes))
	}
	return servers[best], nil
}

func probeSummary(ps []ServerProbe) string {
	parts := make([]string, 0, len(ps))
	for _, p := range ps {
		parts = append(parts, fmt.Sprintf("%s: %s", p.Server, p.Status))
	}
	return strings.Join(parts, "; ")
}

// watchPaths watches the interfaces (the reference app uses iOS's
// Reachability; 000 §II-A) and stops the run when the selected paths, or
// any path with a default route, appear, disappear or change address. It
// re-discovers on each kernel notification (probe.WatchChanges: within
// milliseconds of the change on Linux) and on a safety ticker, PollEvery,
// which catches lost notifications and is the only trigger elsewhere.
func watchPaths(ctx context.Context, o RunOptions, stop context.CancelCauseFunc) {
	watched := pathNames(o.Paths)
	initial := o.Paths
	if ps, err := o.Discover(ctx); err == nil {
		initial = ps
	}
	probe.Watch(ctx, o.PollEvery, 500*time.Millisecond, func(time.Time) bool {
		ps, err := o.Discover(ctx)
		if err != nil {
			return true
		}
		if ch := probe.PathChanges(initial, ps, watched, true); len(ch) > 0 {
			o.Logger.Warn("network changed during test", "change", ch[0].String())
			stop(fmt.Errorf("%w: %s", ErrNetworkChanged, ch[0]))
			return false
		}
		return true
	})
}

// qlogWait bounds the wait for the traces of ended connections.
const qlogWait = 5 * time.Second

// waitQlogs waits, at most qlogWait and also after ctx ended (an
// interrupt), for the qlog traces still being written: their writers
// finish after their connections end, and a caller that exits next must
// leave them whole.
func waitQlogs(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), qlogWait)
	defer cancel()
	return transport.WaitQlogs(ctx)
}
