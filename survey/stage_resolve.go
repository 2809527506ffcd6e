package survey

import (
	"context"
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
