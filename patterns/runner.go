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

	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/probe"
)

// RunOptions of a stable-network run (000 §II-A "stable network mode").
type RunOptions struct {
	Servers    []string // HOST[:PORT]; a port overrides TCPPort and QUICPort
	TCPPort    uint16
	QUICPort   uint16
	Patterns   []string
	Transports []string
	Paths      []probe.Path
	Families   []probe.Family
	Params     Params
	Seed       int64
	Pace       time.Duration // pause between tests
	Timeout    time.Duration // per test; 0 = derived from the pattern
	// ConnectTimeout bounds each connect and handshake (0: only Timeout).
	ConnectTimeout time.Duration
	// Stable watches the paths and invalidates the run when they change.
	Stable    bool
	Discover  func(ctx context.Context) ([]probe.Path, error)
	PollEvery time.Duration
	// TLS returns the client TLS configuration for a server name.
	TLS    func(serverName string) (*tls.Config, error)
	HTTP1  bool
	Logger *slog.Logger
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
	path               probe.Path
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
	var servers []server
	for _, s := range o.Servers {
		sv, err := parseServer(ctx, o, s)
		if err != nil {
			return sum, err
		}
		servers = append(servers, sv)
	}
	sel, err := selectServer(ctx, o, servers)
	if err != nil {
		return sum, err
	}
	sum.Selected = sel.name

	var tests []test
	for _, p := range o.Paths {
		for _, f := range o.Families {
			if err := sel.unresolved(p); err != nil {
				for _, tr := range o.Transports {
					for _, pat := range o.Patterns {
						tests = append(tests, test{pattern: pat, transport: tr, path: p, family: f, unresolved: err})
					}
				}
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
			for _, tr := range o.Transports {
				for _, pat := range o.Patterns {
					tests = append(tests, test{pattern: pat, transport: tr, path: p, family: f})
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
			"path", t.path.Name, "family", int(t.family), "status", rec.Status, "error", rec.Error)
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
	port := sv.tcp
	if t.transport == transport.QUIC {
		port = sv.quic
	}
	cfg := TestConfig{Pattern: t.pattern, Transport: t.transport, Path: t.path.Name, Family: int(t.family),
		Server: netip.AddrPortFrom(ip, port), Params: o.Params, Timeout: o.Timeout, ServerResolution: sv.resolution(t.path, t.family),
		ConnectTimeout: o.ConnectTimeout}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout(t.pattern, o.Params)
	}
	err := t.unresolved
	var tr transport.Transport
	if err == nil {
		tr, err = newTransport(o, sv, t.transport, t.path, t.family)
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

func newTransport(o RunOptions, sv server, name string, p probe.Path, f probe.Family) (transport.Transport, error) {
	tlsCfg, err := o.TLS(sv.host)
	if err != nil {
		return nil, err
	}
	return transport.New(name, transport.Options{Path: p, Family: f, TLS: tlsCfg, HTTP1: o.HTTP1})
}

// selectServer pings every candidate over the first path, family and
// transport and keeps the lowest median among those that answered every
// ping (the reference app's rule).
func selectServer(ctx context.Context, o RunOptions, servers []server) (server, error) {
	if len(servers) == 1 {
		return servers[0], nil
	}
	rec := SelectionRecord{Type: "server_selection", Rule: "lowest median ping among servers that answered every ping", Probes: []ServerProbe{}}
	trName := transport.TCP
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
		port := sv.tcp
		if trName == transport.QUIC {
			port = sv.quic
		}
		sp.Addr = netip.AddrPortFrom(ip, port)
		tr, err := newTransport(o, sv, trName, o.Paths[0], f)
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

// pathState is what stable mode compares: which watched interfaces exist,
// whether they are up and which addresses they carry.
func pathState(ps []probe.Path, watched []string) map[string]string {
	out := map[string]string{}
	for _, p := range ps {
		if !slices.Contains(watched, p.Name) && !p.DefaultRoute {
			continue
		}
		var addrs []string
		for _, a := range p.Addrs {
			if a.Scope != probe.ScopeLinkLocal {
				addrs = append(addrs, a.IP.String())
			}
		}
		slices.Sort(addrs)
		out[p.Name] = fmt.Sprintf("up=%t %s", p.Up, strings.Join(addrs, ","))
	}
	return out
}

// diffPaths describes the first difference, "" if none.
func diffPaths(before, after map[string]string) string {
	names := make([]string, 0, len(before)+len(after))
	for n := range before {
		names = append(names, n)
	}
	for n := range after {
		if _, ok := before[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		b, inB := before[n]
		a, inA := after[n]
		switch {
		case inB && !inA:
			return fmt.Sprintf("%s disappeared", n)
		case !inB && inA:
			return fmt.Sprintf("%s appeared (%s)", n, a)
		case a != b:
			return fmt.Sprintf("%s changed from %q to %q", n, b, a)
		}
	}
	return ""
}

// watchPaths watches the interfaces (the reference app uses iOS's
// Reachability; 000 §II-A) and stops the run when the selected paths, or
// any path with a default route, appear, disappear or change address. It
// re-discovers on each kernel notification (probe.WatchChanges: within
// milliseconds of the change on Linux) and on a safety ticker, PollEvery,
// which catches lost notifications and is the only trigger elsewhere.
func watchPaths(ctx context.Context, o RunOptions, stop context.CancelCauseFunc) {
	watched := pathNames(o.Paths)
	initial := pathState(o.Paths, watched)
	if ps, err := o.Discover(ctx); err == nil {
		initial = pathState(ps, watched)
	}
	probe.Watch(ctx, o.PollEvery, 500*time.Millisecond, func(time.Time) bool {
		ps, err := o.Discover(ctx)
		if err != nil {
			return true
		}
		if d := diffPaths(initial, pathState(ps, watched)); d != "" {
			o.Logger.Warn("network changed during test", "change", d)
			stop(fmt.Errorf("%w: %s", ErrNetworkChanged, d))
			return false
		}
		return true
	})
}
