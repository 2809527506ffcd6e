package survey

import (
	"context"
	"slices"
	"sync"
)

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

// toResolve counts the (path, domain) resolutions still to do.
func (r *runner) toResolve(resolvers map[string]*Resolver) int {
	total := 0
	for name := range resolvers {
		for i := range r.cfg.Domains {
			if !r.res[name][i].Done {
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
		pi := slices.Index(r.names, name)
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
					stage.add(1)
					if rec.Status == StatusNoError {
						r.addResolved(pi, i, rec.Answers)
					}
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
}

// indexResumed queues the targets of the resolutions loaded from the run
// being resumed.
func (r *runner) indexResumed(resolvers map[string]*Resolver) {
	for _, name := range r.resolvePaths(resolvers) {
		pi := slices.Index(r.names, name)
		for i, d := range r.res[name] {
			if d.Done && d.Status == StatusNoError {
				r.addResolved(pi, i, d.Addrs)
			}
		}
	}
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
