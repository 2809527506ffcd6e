package survey

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/mptester/mptester/probe"
)

// statusCodes numbers resolution statuses for the one byte a run keeps per
// domain and path (code i+1 is names[i]; 0 is "not resolved yet"). The
// known statuses have fixed codes; others (from a resumed file) are added.
// Callers hold runner.mu.
type statusCodes struct{ names []string }

var knownStatuses = []string{StatusNoError, StatusNXDomain, StatusServFail, StatusRefused, StatusTimeout, StatusNoAnswer, StatusError}

func (c *statusCodes) code(st string) uint8 {
	if c.names == nil {
		c.names = slices.Clone(knownStatuses)
	}
	if i := slices.Index(c.names, st); i >= 0 {
		return uint8(i + 1)
	}
	if len(c.names) == 255 {
		return uint8(slices.Index(c.names, StatusError) + 1) // a hostile file: 248 made-up statuses
	}
	c.names = append(c.names, st)
	return uint8(len(c.names))
}

func (c *statusCodes) name(code uint8) string {
	if code == 0 {
		return ""
	}
	if c.names == nil {
		c.names = slices.Clone(knownStatuses)
	}
	return c.names[code-1]
}

// resumedResolution is a NOERROR resolution loaded from the resumed run,
// indexed once its probe records are known too (indexResumed).
type resumedResolution struct {
	rpi   int
	di    int
	addrs []netip.Addr
}

// statusOf is domain d's status on path names[pi] ("": not resolved).
func (r *runner) statusOf(pi, d int) string {
	return r.codes.name(r.status[r.names[pi]][d])
}

// eachAddr calls fn for every resolved address with its domains (see
// spill.Groups); after resolution and probing ended.
func (r *runner) eachAddr(fn func(netip.Addr, []uint32)) {
	r.doms.Each(func(ai int32, doms []uint32) { fn(r.addrs.addr(ai), doms) })
}

// resolvers returns the resolver of every path that has DNS, warning about
// the others (they still probe, but resolve nothing).
func (r *runner) resolvers() map[string]*Resolver {
	out := map[string]*Resolver{}
	for _, name := range r.names {
		res, err := NewResolver(r.paths[name], r.cfg.DNSTimeout, r.cfg.DNSRetries, r.cfg.ResolverCap, r.bytes[name], r.health.suspectHost)
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

// toResolve counts the (path, domain) resolutions still to do.
func (r *runner) toResolve(resolvers map[string]*Resolver) int {
	total := 0
	for name := range resolvers {
		for _, st := range r.status[name] {
			if st == 0 {
				total++
			}
		}
	}
	return total
}

// resolveAll resolves every domain not done yet on every path, handing
// each answer to probing as it comes.
func (r *runner) resolveAll(ctx context.Context, resolvers map[string]*Resolver, stage *stageProgress) {
	var wg sync.WaitGroup
	for _, name := range r.resolvePaths(resolvers) {
		wg.Go(func() { r.resolvePath(ctx, name, resolvers[name], stage) })
	}
	wg.Wait()
}

// resolved is a lookup's end, back at its path's loop.
type resolved struct {
	i   int
	rec ResolutionRecord
}

// resolvePath starts the path's lookups in list order from one goroutine
// as fast as its resolver takes them: a new lookup starts while no query
// waits for a slot at its server (the resolver sizes each server's window
// from its answers and frees the slot of a query that looks lost, so a
// name that will time out does not hold back the ones after it), at most
// ResolveWorkers at once. The lookups are state in the resolver (no
// goroutine each; 1,048 of them held 11.5 MB of stacks at 1M domains),
// their records come back here to be written and handed to probing.
func (r *runner) resolvePath(ctx context.Context, name string, res *Resolver, stage *stageProgress) {
	pi := slices.Index(r.names, name)
	workers := r.cfg.ResolveWorkers
	// Ended lookups wait in a slice, not a channel sized for the most
	// that can be in flight: a resolver's goroutine never blocks on it.
	var (
		mu    sync.Mutex
		ended []resolved
	)
	wake := make(chan struct{}, 1)
	post := func(d resolved) {
		mu.Lock()
		ended = append(ended, d)
		mu.Unlock()
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	start := func(i int) {
		res.Start(ctx, r.list.At(i), r.cfg.Family, func(rec ResolutionRecord) { post(resolved{i, rec}) })
	}
	var batch []resolved
	inflight, next, n := 0, 0, r.list.Len()
	startMore := func() {
		for inflight < workers && next < n && ctx.Err() == nil && res.r.Backlog() == 0 {
			i := next
			next++
			r.mu.Lock()
			todo := r.status[name][i] == 0
			r.mu.Unlock()
			if todo {
				start(i)
				inflight++
			}
		}
	}
	for {
		startMore()
		if inflight == 0 {
			return
		}
		select {
		case <-wake:
		case <-res.r.Room():
			continue
		}
		mu.Lock()
		batch, ended = ended, batch[:0]
		mu.Unlock()
		// The ended lookups' slots go to new ones before their records
		// are written: a burst of answers must not hold the list back.
		inflight -= len(batch)
		for k, d := range batch {
			batch[k] = resolved{}
			if k%64 == 0 {
				startMore()
			}
			if ctx.Err() != nil {
				continue // unfinished: resolved again on resume
			}
			r.countHostLoss(d.rec)
			d.rec.Valid = r.watch.valid(name)
			r.mu.Lock()
			r.status[name][d.i] = r.codes.code(d.rec.Status)
			r.mu.Unlock()
			if d.rec.Status == StatusNoError {
				if m := r.unsynthesize(pi, d.rec.Answers); !slices.Equal(m, d.rec.Answers) {
					d.rec.AnswersMapped = m
				}
			}
			r.write(d.rec)
			stage.add(1)
			if d.rec.Status == StatusNoError {
				r.addResolved(pi, d.i, d.rec.Answers)
			}
		}
	}
}

// DefaultResolverCap is the most queries in flight at one DNS server: the
// window each server's answers size stays below it.
const DefaultResolverCap = 500

// logResolverLoad says what the resolution asked of each DNS server.
func (r *runner) logResolverLoad(resolvers map[string]*Resolver) {
	for _, name := range r.resolvePaths(resolvers) {
		for _, l := range resolvers[name].r.Load() {
			r.log.Info("resolver load", "path", name, "server", l.Server, "peak_window", l.PeakWindow,
				"window", l.Window, "cap", r.cfg.ResolverCap, "min_rtt", l.MinRTT.Round(time.Microsecond),
				"srtt", l.SRTT.Round(time.Microsecond), "cuts", fmt.Sprintf("queue %d, late %d, loss %d, servfail %d, drops %d",
					l.Cuts[probe.CutQueue], l.Cuts[probe.CutLate], l.Cuts[probe.CutLoss], l.Cuts[probe.CutServFail], l.Cuts[probe.CutDrops]))
		}
	}
}

// indexResumed queues the targets of the resolutions loaded from the run
// being resumed.
func (r *runner) indexResumed(resolvers map[string]*Resolver) {
	for _, rr := range r.resumed {
		if resolvers[r.names[rr.rpi]] != nil {
			r.addResolved(rr.rpi, rr.di, rr.addrs)
		}
	}
	r.resumed = nil
}

// warnDeadResolvers says so when a path resolved nothing and most of its
// queries timed out: its resolvers are probably unreachable from it.
func (r *runner) warnDeadResolvers(resolvers map[string]*Resolver) {
	for _, name := range r.resolvePaths(resolvers) {
		done, ok, timeouts := 0, 0, 0
		for _, code := range r.status[name] {
			if code == 0 {
				continue
			}
			done++
			switch r.codes.name(code) {
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
