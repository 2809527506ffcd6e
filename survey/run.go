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
)

// Errors Run returns alongside a (partial) summary; the command maps them
// to exit codes.
var (
	ErrInterrupted = errors.New("survey interrupted")
	ErrIncomplete  = errors.New("survey incomplete") // a path could not resolve, or probes failed to start
	ErrPathChanged = errors.New("a path changed during the survey")
)

// Config of one survey run.
type Config struct {
	Paths   []probe.Path // probe and resolution paths, in order
	Domains []Domain
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
	ResolverCap    int // queries in flight per DNS server
	ResolveWorkers int // domains in flight per path
	MaxInFlight    int // targets being probed at once; 0 = from rate
	ConnectCap     time.Duration

	// Discover, when set, is polled every WatchInterval to detect a path
	// going down or changing address.
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
		c.ResolverCap = 200
	}
	if c.ResolveWorkers <= 0 {
		c.ResolveWorkers = 256
	}
	if c.Burst <= 0 {
		c.Burst = 1
	}
	if c.WatchInterval <= 0 {
		c.WatchInterval = time.Second
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
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// runner is the state of one run. It holds per-domain address lists and
// per-target medians only; probe records are streamed out as they finish.
type runner struct {
	cfg     Config
	out     *report.Stream
	log     *slog.Logger
	names   []string // path names in order
	paths   map[string]probe.Path
	domIdx  map[string]int
	res     map[string][]DomainResult
	mu      sync.Mutex
	results map[string]map[netip.Addr]TargetResult
	skipped map[skipKey]int
	bytes   map[string]*atomic.Int64
	watch   *watcher
	prog    *progress
	lim     *Limiter
	failed  atomic.Bool // something did not run (reported as partial)
	probes  atomic.Int64
	writeMu sync.Mutex
	writeEr error
}

// Run resolves and probes, streaming records to out, and returns the
// summary (also written to out). The trailer is left to the caller.
func Run(ctx context.Context, cfg Config, out *report.Stream) (Summary, error) {
	cfg.defaults()
	if _, ok := Methods[cfg.Method]; !ok {
		return Summary{}, fmt.Errorf("unknown probe method %q", cfg.Method)
	}
	r := &runner{cfg: cfg, out: out, log: cfg.Logger, paths: map[string]probe.Path{}, domIdx: map[string]int{},
		res: map[string][]DomainResult{}, results: map[string]map[netip.Addr]TargetResult{},
		skipped: map[skipKey]int{}, bytes: map[string]*atomic.Int64{}, watch: newWatcher(),
		lim: NewLimiter(cfg.Rate, cfg.Burst)}
	for _, p := range cfg.Paths {
		r.names = append(r.names, p.Name)
		r.paths[p.Name] = p
		r.res[p.Name] = make([]DomainResult, len(cfg.Domains))
		r.results[p.Name] = map[netip.Addr]TargetResult{}
		r.bytes[p.Name] = new(atomic.Int64)
	}
	for i, d := range cfg.Domains {
		r.domIdx[d.Name] = i
	}
	if cfg.Progress != nil {
		r.prog = &progress{w: cfg.Progress}
	}
	bg, cancelBG := context.WithCancel(context.WithoutCancel(ctx))
	var bgWG sync.WaitGroup
	bgWG.Go(func() { r.watch.run(bg, cfg.Discover, cfg.WatchInterval, cfg.Paths) })
	bgWG.Go(func() { r.prog.run(bg) })
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
	r.resolveAll(ctx, resolvers)
	r.log.Info("resolution done", "paths", len(resolvers), "domains", len(cfg.Domains), "elapsed", time.Since(t0).Round(time.Millisecond))
	r.warnDeadResolvers(resolvers)
	if ctx.Err() == nil {
		t1 := time.Now()
		r.probeAll(ctx, resolvers)
		el := time.Since(t1)
		n := r.probes.Load()
		r.log.Info("probing done", "probes", n, "elapsed", el.Round(time.Millisecond),
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
		r.writeMu.Lock()
		if r.writeEr == nil {
			r.writeEr = fmt.Errorf("write output: %w", err)
		}
		r.writeMu.Unlock()
		return err
	}
	return nil
}

// resolvers returns the resolver of every path that has DNS, warning about
// the others (they still probe, but resolve nothing).
func (r *runner) resolvers() map[string]*Resolver {
	out := map[string]*Resolver{}
	for _, name := range r.names {
		res, err := NewResolver(r.paths[name], r.cfg.DNSTimeout, r.cfg.DNSRetries, r.cfg.ResolverCap, r.bytes[name])
		if err != nil {
			r.log.Warn("path resolves nothing; it is still used to probe", "path", name, "err", err)
			r.failed.Store(true)
			continue
		}
		out[name] = res
	}
	return out
}

func (r *runner) resolvePaths(resolvers map[string]*Resolver) []string {
	var out []string
	for _, n := range r.names {
		if resolvers[n] != nil {
			out = append(out, n)
		}
	}
	return out
}

func (r *runner) resolveAll(ctx context.Context, resolvers map[string]*Resolver) {
	type job struct {
		path string
		i    int
	}
	total := 0
	for name := range resolvers {
		for i := range r.cfg.Domains {
			if !r.res[name][i].Done {
				total++
			}
		}
	}
	r.prog.begin("resolve", total)
	var wg sync.WaitGroup
	for _, name := range r.resolvePaths(resolvers) {
		jobs := make(chan int)
		res := resolvers[name]
		for range r.cfg.ResolveWorkers {
			wg.Go(func() {
				for i := range jobs {
					rec := res.Resolve(ctx, r.cfg.Domains[i], r.cfg.Family)
					if ctx.Err() != nil {
						continue // unfinished: resolved again on resume
					}
					rec.Valid = r.watch.valid(name)
					r.mu.Lock()
					r.res[name][i] = DomainResult{Done: true, Status: rec.Status, Addrs: rec.Answers}
					r.mu.Unlock()
					r.write(rec)
					r.prog.add(1)
				}
			})
		}
		wg.Go(func() {
			defer close(jobs)
			for i := range r.cfg.Domains {
				if r.res[name][i].Done {
					continue
				}
				select {
				case jobs <- i:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	wg.Wait()
	// Count the resolvers' bytes only now: resumed records were added at load.
}

// warnDeadResolvers says so when a path resolved nothing and most of its
// queries timed out: its resolvers are probably unreachable from it.
func (r *runner) warnDeadResolvers(resolvers map[string]*Resolver) {
	for _, name := range r.resolvePaths(resolvers) {
		done, ok, timeouts := 0, 0, 0
		for _, d := range r.res[name] {
			if !d.Done {
				continue
			}
			done++
			switch d.Status {
			case StatusNoError:
				ok++
			case StatusTimeout:
				timeouts++
			}
		}
		if done > 0 && ok == 0 && 2*timeouts > done {
			r.log.Warn("no domain resolved on this path and most queries timed out: are its DNS servers reachable through it?",
				"path", name, "servers", resolvers[name].servers, "timeouts", timeouts, "domains", done)
		}
	}
}

// target is one address to probe from one path.
type target struct {
	probe    string
	addr     netip.Addr
	resolves []string // resolution paths whose cell it belongs to
	domains  []string
}

// targets lists, per probe path, the addresses to probe and counts the
// skipped ones. Probe paths are interleaved so every path progresses.
func (r *runner) targets(resolvePaths []string) []target {
	type addrInfo struct {
		byPath map[string][]int // resolution path -> domain indexes
	}
	var order []netip.Addr
	infos := map[netip.Addr]*addrInfo{}
	for _, rp := range resolvePaths {
		for i, d := range r.res[rp] {
			if !d.Done || d.Status != StatusNoError {
				continue
			}
			for _, a := range d.Addrs {
				ai := infos[a]
				if ai == nil {
					ai = &addrInfo{byPath: map[string][]int{}}
					infos[a] = ai
					order = append(order, a)
				}
				if l := ai.byPath[rp]; len(l) == 0 || l[len(l)-1] != i {
					ai.byPath[rp] = append(l, i)
				}
			}
		}
	}
	var out []target
	var idx []int
	for _, a := range order {
		ai := infos[a]
		for _, pp := range r.names {
			t := target{probe: pp, addr: a}
			for _, rp := range resolvePaths {
				doms, ok := ai.byPath[rp]
				if !ok {
					continue
				}
				if why := r.cfg.Policy.Check(r.paths[pp], r.paths[rp], a); why != "" {
					r.skipped[skipKey{pp, rp, why}]++
					continue
				}
				t.resolves = append(t.resolves, rp)
				idx = append(idx, doms...)
			}
			if len(t.resolves) > 0 {
				// A CDN address can serve thousands of domains: sort and
				// compact rather than a quadratic membership test.
				slices.Sort(idx)
				for _, di := range slices.Compact(idx) {
					t.domains = append(t.domains, r.cfg.Domains[di].Name)
				}
				out = append(out, t)
			}
			idx = idx[:0]
		}
	}
	return out
}

func (r *runner) probeAll(ctx context.Context, resolvers map[string]*Resolver) {
	all := r.targets(r.resolvePaths(resolvers))
	var todo []target
	for _, t := range all {
		if _, done := r.results[t.probe][t.addr]; !done {
			todo = append(todo, t)
		}
	}
	r.prog.begin("probe", len(todo)*r.cfg.Count)
	probers := map[string]Prober{}
	for _, name := range r.names {
		p, err := NewProber(ctx, r.cfg.Method, r.paths[name], ProberOptions{ConnectCap: r.cfg.ConnectCap})
		if err != nil {
			r.log.Warn("cannot probe from path", "path", name, "err", err)
			r.failed.Store(true)
			continue
		}
		probers[name] = p
		defer p.Close()
	}
	perProbe := r.bytesPerProbe()
	sem := make(chan struct{}, r.cfg.MaxInFlight)
	var wg sync.WaitGroup
	for _, t := range todo {
		pr := probers[t.probe]
		if pr == nil {
			continue
		}
		if max := r.cfg.MaxBytes[t.probe]; max > 0 && r.bytes[t.probe].Load()+int64(r.cfg.Count*perProbe(t.addr)) > max {
			for _, rp := range t.resolves {
				r.skipped[skipKey{t.probe, rp, SkipMaxBytes}]++
			}
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		// Reserve the budget now so concurrent targets cannot overrun it.
		reserved := int64(r.cfg.Count * perProbe(t.addr))
		r.bytes[t.probe].Add(reserved)
		wg.Go(func() {
			defer func() { <-sem }()
			r.probeTarget(ctx, pr, t, reserved)
		})
	}
	wg.Wait()
}

// lowerBound is the shortest possible probing time for n probes: n/rate
// plus one timeout for the last answers.
func (r *runner) lowerBound(n int64) time.Duration {
	if r.cfg.Rate <= 0 {
		return r.cfg.Timeout
	}
	return time.Duration(float64(n)/r.cfg.Rate*float64(time.Second)) + r.cfg.Timeout
}

// bytesPerProbe estimates the bytes one probe sends, for the budget.
func (r *runner) bytesPerProbe() func(netip.Addr) int {
	return func(a netip.Addr) int {
		switch r.cfg.Method {
		case "tcp-syn":
			return ipHeader(a) + 24
		case "icmp":
			return ipHeader(a) + 24
		}
		return synBytes(a) + 2*ipTCPHeader(a)
	}
}

func (r *runner) probeTarget(ctx context.Context, pr Prober, t target, reserved int64) {
	results := make([]Result, r.cfg.Count)
	var wg sync.WaitGroup
	var last time.Time
	for i := range r.cfg.Count {
		if i > 0 {
			if sleepUntil(ctx, last.Add(r.cfg.Spacing)) != nil {
				break
			}
		}
		if r.lim.Wait(ctx) != nil {
			break
		}
		last = time.Now()
		r.probes.Add(1)
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
			defer cancel()
			results[i] = pr.Probe(pctx, Target{Addr: t.addr, Port: r.cfg.Port})
			r.prog.add(1)
		})
	}
	wg.Wait()
	var sent int64
	for _, res := range results {
		sent += int64(res.Bytes)
	}
	r.bytes[t.probe].Add(sent - reserved)
	if ctx.Err() != nil {
		return // incomplete target: not recorded, probed again on resume
	}
	rec := r.record(t, results)
	rec.Bytes = sent
	rec.Valid = r.watch.valid(append([]string{t.probe}, t.resolves...)...)
	r.mu.Lock()
	r.results[t.probe][t.addr] = TargetResult{Responsive: rec.Responsive, MedianMs: rec.Median}
	r.mu.Unlock()
	r.write(rec)
}

func (r *runner) record(t target, results []Result) ProbeRecord {
	rec := ProbeRecord{Type: "probe", ProbePath: t.probe, ResolvePath: t.resolves[0], ResolvePaths: t.resolves,
		Address: t.addr, Domains: t.domains, Method: r.cfg.Method, RTTsMs: []float64{}}
	if r.cfg.Method != "icmp" {
		rec.Port = r.cfg.Port
	}
	for _, res := range results {
		if res.Status == ProbeCancelled || (res.Status == "" && res.Kind == AnswerNone) {
			continue
		}
		if res.Status != ProbeError || res.Bytes > 0 {
			rec.Sent++
		}
		if res.Kind != AnswerNone {
			rec.Received++
			rec.RTTsMs = append(rec.RTTsMs, msOf(res.RTT))
			if rec.Answer == AnswerNone {
				rec.Answer = res.Kind
			}
			if rec.Answers == nil {
				rec.Answers = map[string]int{}
			}
			rec.Answers[string(res.Kind)]++
			continue
		}
		if res.Status != ProbeTimeout && res.Status != ProbeSuccess {
			if rec.Errors == nil {
				rec.Errors = map[string]int{}
			}
			rec.Errors[string(res.Status)]++
			r.log.Debug("probe failed", "path", t.probe, "addr", t.addr, "err", res.Err)
		}
	}
	rec.ProbeStats = statsOf(rec.RTTsMs)
	rec.Responsive = rec.answered()
	return rec
}

func (r *runner) summary(resolvers map[string]*Resolver) Summary {
	rps := r.resolvePaths(resolvers)
	in := summaryInput{Paths: r.names, ResolvePaths: rps, Domains: len(r.cfg.Domains), Res: r.res,
		Probe: r.results, Skipped: r.skipped,
		Allowed: func(p, rp string, a netip.Addr) bool {
			return r.cfg.Policy.Check(r.paths[p], r.paths[rp], a) == ""
		}}
	s := computeSummary(in)
	s.BytesSent = map[string]int64{}
	for _, n := range r.names {
		s.BytesSent[n] = r.bytes[n].Load()
	}
	s.Invalid = r.watch.records(r.names)
	return s
}
