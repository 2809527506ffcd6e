package survey

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"time"
)

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
		connectCap := r.cfg.ConnectCap
		if connectCap <= 0 {
			connectCap = defaultConnectCap
		}
		p, err := NewProber(ctx, r.cfg.Method, r.paths[name], ProberOptions{ConnectCap: min(connectCap, r.cfg.Timeout)})
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
		if limit := r.cfg.MaxBytes[t.probe]; limit > 0 && r.bytes[t.probe].Load()+int64(r.cfg.Count*perProbe(t.addr)) > limit {
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
	// One goroutine per target: send every probe (spaced, paced), then
	// collect the answers; each probe has Timeout from its own send.
	results := make([]Result, r.cfg.Count)
	pend := make([]Pending, 0, r.cfg.Count)
	sentAt := make([]time.Time, 0, r.cfg.Count)
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
		pend = append(pend, start(ctx, pr, Target{Addr: t.addr, Port: r.cfg.Port}, r.cfg.Timeout))
		sentAt = append(sentAt, last)
	}
	for i, p := range pend {
		results[i] = p.Result(ctx, sentAt[i].Add(r.cfg.Timeout))
		r.prog.add(1)
	}
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
