package survey

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/report"
	"github.com/mptester/mptester/survey/internal/spill"
	"github.com/mptester/mptester/survey/list"
)

// Errors Run returns alongside a (partial) summary; the command maps them
// to exit codes.
var (
	ErrInterrupted = errors.New("survey interrupted")
	ErrIncomplete  = errors.New("survey incomplete") // a path could not resolve, or probes failed to start
	ErrPathChanged = errors.New("a path changed during the survey")
	// ErrDegraded: the host could not keep up and some targets are marked
	// host_overloaded instead of measured, or some resolutions timed out
	// while it dropped packets (Summary.Degraded says why).
	ErrDegraded = errors.New("survey degraded")
)

// Domain is one entry of a ranked list (package list reads them).
type Domain = list.Domain

// Config of one survey run.
type Config struct {
	Paths   []probe.Path // probe and resolution paths, in order
	Domains []Domain
	// List, if set, replaces Domains: the compact form OpenList returns
	// (a top-1M list as []Domain is ~45 MB).
	List    *list.DomainList
	Family  probe.Family
	Method  string
	Port    int
	Count   int
	Timeout time.Duration // per probe
	Spacing time.Duration // between two probes of one target
	Rate    float64       // probes per second, all paths together; <= 0: unlimited
	Burst   int
	Policy  Policy
	// MaxBytes caps the bytes sent per path (metered links); 0 = none.
	MaxBytes map[string]int64

	DNSTimeout     time.Duration
	DNSRetries     int
	ResolverCap    int // the most queries in flight per DNS server (its adaptive window's cap)
	ResolveWorkers int // the most lookups in flight per path
	MaxInFlight    int // targets being probed at once; 0 = from rate
	// MaxHeld caps the probe records finished while resolution still runs
	// (they are held until it ends) when they cannot be spilled to a
	// temporary file; probing then pauses at the cap so a long list's
	// memory stays bounded. 0 = 20000 (about 6 MB).
	MaxHeld    int
	ConnectCap time.Duration

	// Discover, when set, lists the paths again on every change the
	// kernel notifies (Linux) and every WatchInterval (default 5 s with
	// notifications, 1 s without), to detect a path going down or changing
	// address.
	Discover      DiscoverFunc
	WatchInterval time.Duration
	// ResumeFrom is the output of an interrupted run: its resolution and
	// probe records are copied to the new output and not measured again.
	ResumeFrom io.Reader
	Progress   io.Writer // nil: draw nothing
	Logger     *slog.Logger
}

func (c *Config) defaults() {
	if c.Method == "" {
		c.Method = "tcp-connect"
	}
	if c.Port == 0 {
		c.Port = 443
	}
	if c.Count <= 0 {
		c.Count = 10
	}
	if c.Timeout <= 0 {
		c.Timeout = time.Second
	}
	if c.DNSTimeout <= 0 {
		c.DNSTimeout = 2 * time.Second
	}
	if c.ResolverCap <= 0 {
		c.ResolverCap = DefaultResolverCap
	}
	if c.ResolveWorkers <= 0 {
		c.ResolveWorkers = 4096
	}
	if c.Burst <= 0 {
		c.Burst = 1
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 256
		if c.Rate > 0 {
			// Each target holds a slot for (Count-1)*Spacing + Timeout and
			// uses Count tokens: keep enough targets busy to use the rate.
			life := float64(c.Count-1)*c.Spacing.Seconds() + c.Timeout.Seconds()
			c.MaxInFlight = int(c.Rate*life/float64(c.Count)*1.5) + 16
		}
		c.MaxInFlight = min(c.MaxInFlight, 20000)
	}
	if c.MaxHeld <= 0 {
		c.MaxHeld = 20000
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// runner is the state of one run. It holds per-domain address lists, the
// address index and per-target medians only; probe records are streamed out
// as they finish (those finished during resolution once it ends).
type runner struct {
	cfg     Config
	out     *report.Stream
	log     *slog.Logger
	names   []string // path names in order
	paths   map[string]probe.Path
	list    *list.DomainList
	ownList bool // made from Config.Domains: closed by Run
	// status is, per path and domain, the resolution status as a code of
	// statusCodes (0: not resolved yet); guarded by mu while resolving.
	status map[string][]uint8
	codes  statusCodes
	// doms holds per address index the entries (resolution path
	// index<<24 | domain index) that resolved to it, in arrival order,
	// memory-bounded; Add and Seal under mu, Get and Each once sealed.
	doms    spill.Groups
	resumed []resumedResolution // NOERROR resolutions of the resumed run
	mu      sync.Mutex
	results map[string]map[netip.Addr]TargetResult
	addrs   *addrIndex // numbered addresses with their state and results; guarded by mu
	queue   *targetQueue
	held    heldStore // guarded by mu
	// resolved is set once resolution ended (guarded by mu), and
	// resolvedCh closed.
	resolved   bool
	resolvedCh chan struct{}
	probeStage *stageProgress
	skipped    map[skipKey]int
	synthDoms  []int // per path, domains with a synthesized AAAA; guarded by mu
	bytes      map[string]*atomic.Int64
	watch      *watcher
	prog       *progress
	lim        *Limiter
	health     *health
	failed     atomic.Bool // something did not run (reported as partial)
	probes     atomic.Int64
	writeMu    sync.Mutex
	writeEr    error
}

// Run resolves and probes, streaming records to out, and returns the
// summary (also written to out). The trailer is left to the caller.
func Run(ctx context.Context, cfg Config, out *report.Stream) (Summary, error) {
	cfg.defaults()
	if _, ok := Methods[cfg.Method]; !ok {
		return Summary{}, fmt.Errorf("unknown probe method %q", cfg.Method)
	}
	dl, ownList := cfg.List, false
	if dl == nil {
		dl, ownList = list.NewDomainList(cfg.Domains), true
	}
	if len(cfg.Paths) > maxPaths || dl.Len() >= maxDomains {
		return Summary{}, fmt.Errorf("survey of %d domains on %d paths: at most %d domains and %d paths", dl.Len(), len(cfg.Paths), maxDomains-1, maxPaths)
	}
	r := &runner{cfg: cfg, out: out, log: cfg.Logger, paths: map[string]probe.Path{}, list: dl, ownList: ownList,
		status: map[string][]uint8{}, results: map[string]map[netip.Addr]TargetResult{},
		queue: newTargetQueue(), resolvedCh: make(chan struct{}),
		skipped: map[skipKey]int{}, bytes: map[string]*atomic.Int64{}, watch: newWatcher(),
		lim: NewLimiter(cfg.Rate, cfg.Burst), addrs: newAddrIndex(len(cfg.Paths)), synthDoms: make([]int, len(cfg.Paths))}
	r.held = newHeldStore(testNoSpill)
	for _, p := range cfg.Paths {
		r.names = append(r.names, p.Name)
		r.paths[p.Name] = p
		r.status[p.Name] = make([]uint8, dl.Len())
		r.results[p.Name] = map[netip.Addr]TargetResult{}
		r.bytes[p.Name] = new(atomic.Int64)
	}
	r.health = newHealth(cfg.Rate, r.lim, cfg.Timeout, r.names)
	if ownList {
		defer dl.Close()
	}
	defer r.doms.Close()
	defer r.addrs.close()
	if cfg.Progress != nil {
		r.prog = &progress{w: cfg.Progress}
	}
	bg, cancelBG := context.WithCancel(context.WithoutCancel(ctx))
	var bgWG sync.WaitGroup
	bgWG.Go(func() { r.watch.run(bg, cfg.Discover, cfg.WatchInterval, cfg.Paths) })
	bgWG.Go(func() { r.prog.run(bg) })
	bgWG.Go(func() { r.health.run(bg) })
	// The watcher and the progress bar end before Run returns: nothing
	// writes to stderr after the command is done.
	stopBG := func() { cancelBG(); bgWG.Wait() }
	defer stopBG()

	if cfg.ResumeFrom != nil {
		if err := r.resume(cfg.ResumeFrom); err != nil {
			return Summary{}, err
		}
	}
	resolvers := r.resolvers()
	t0 := time.Now()
	engines := r.newEngines(ctx)
	defer func() {
		for _, p := range engines {
			p.Close()
		}
	}()
	resolveStage := r.prog.begin("resolve", r.toResolve(resolvers))
	r.probeStage = r.prog.begin("probe", 0)
	r.indexResumed(resolvers)
	var probing sync.WaitGroup
	probing.Go(func() { r.probeLoop(ctx, engines) })
	r.resolveAll(ctx, resolvers, resolveStage)
	r.queue.close()
	r.log.Info("resolution done", "paths", len(resolvers), "domains", dl.Len(), "elapsed", time.Since(t0).Round(time.Millisecond))
	r.logResolverLoad(resolvers)
	r.resolutionDone()
	r.warnDeadResolvers(resolvers)
	probing.Wait()
	r.mu.Lock()
	addrErr := r.addrs.err
	r.mu.Unlock()
	r.failRun(addrErr) // some addresses' records are lost
	if ctx.Err() == nil {
		el := time.Since(t0)
		n := r.probes.Load()
		r.log.Info("survey done", "probes", n, "elapsed", el.Round(time.Millisecond),
			"rate", fmt.Sprintf("%.0f/s", float64(n)/el.Seconds()), "lower_bound", r.lowerBound(n).Round(time.Millisecond))
	}
	stopBG()

	s := r.summary(resolvers)
	var err error
	switch {
	case ctx.Err() != nil:
		s.Status = string(report.StatusPartial)
		err = ErrInterrupted
	case len(s.Invalid) > 0:
		s.Status = string(report.StatusInvalid)
		err = ErrPathChanged
	case r.failed.Load():
		s.Status = string(report.StatusPartial)
		err = ErrIncomplete
	case s.Degraded != nil && (s.Degraded.HostOverloaded > 0 || s.Degraded.ResolutionsSuspect > 0):
		s.Status = string(report.StatusPartial)
		err = fmt.Errorf("%w: %s", ErrDegraded, s.Degraded.Reason)
	}
	if werr := r.write(s); werr != nil {
		return s, werr
	}
	if r.writeEr != nil {
		return s, r.writeEr
	}
	return s, err
}

func (r *runner) write(rec any) error {
	if err := r.out.Write(rec); err != nil {
		r.failRun(fmt.Errorf("write output: %w", err))
		return err
	}
	return nil
}

// failRun records the first error that makes the run's output incomplete
// (Run returns it); nil is ignored.
func (r *runner) failRun(err error) {
	if err == nil {
		return
	}
	r.writeMu.Lock()
	if r.writeEr == nil {
		r.writeEr = err
	}
	r.writeMu.Unlock()
}

func (r *runner) summary(resolvers map[string]*Resolver) Summary {
	rps := r.resolvePaths(resolvers)
	in := summaryInput{Paths: r.names, ResolvePaths: rps, Domains: r.list.Len(),
		Status: r.statusOf, Addrs: r.eachAddr, Probe: r.targetResult, Skipped: r.skipped,
		Allowed: func(p, rp string, a netip.Addr) bool {
			return r.cfg.Policy.Check(r.paths[p], r.paths[rp], a) == ""
		},
		Via: func(pi int, a netip.Addr) bool {
			_, ok := r.cfg.Policy.ViaNAT64(r.paths[r.names[pi]], a)
			return ok
		}}
	s := computeSummary(in)
	for i := range s.Resolution {
		s.Resolution[i].NAT64Prefix = r.cfg.Policy.NAT64[s.Resolution[i].Path]
		s.Resolution[i].Synthesized = r.synthDoms[slices.Index(r.names, s.Resolution[i].Path)]
	}
	s.BytesSent = map[string]int64{}
	for _, n := range r.names {
		s.BytesSent[n] = r.bytes[n].Load()
	}
	s.Invalid = r.watch.records(r.names)
	s.Degraded = r.health.degraded()
	return s
}
