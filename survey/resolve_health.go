package survey

import (
	"context"
	"time"
)

// resolveClean resolves domain i with res. A lookup with a query that
// timed out while the host was dropping packets (health: an interface
// queue, the IP output, the input backlog; not the probe sockets' own
// receive queues) says nothing about the resolver: it is done again after reprobePause, up to maxReprobes times,
// like a probe. Still suspect then, it keeps its timeout and is counted
// (the run ends partial, its reason says how many).
func (r *runner) resolveClean(ctx context.Context, res *Resolver, i int) ResolutionRecord {
	for try := 0; ; try++ {
		start := time.Now()
		rec := res.Resolve(ctx, r.list.At(i), r.cfg.Family)
		if !timedOut(rec) || ctx.Err() != nil || !r.health.suspectHost(start, time.Now()) {
			return rec
		}
		if try == maxReprobes {
			r.health.countResolution(false)
			return rec
		}
		if try == 0 {
			r.health.countResolution(true)
		}
		if sleepUntil(ctx, time.Now().Add(reprobePause)) != nil {
			return rec
		}
	}
}

// timedOut: the lookup, or one of its queries (an AAAA beside an answered
// A), got no answer.
func timedOut(rec ResolutionRecord) bool {
	if rec.Status == StatusTimeout {
		return true
	}
	for _, q := range rec.Queries {
		if q.Status == StatusTimeout {
			return true
		}
	}
	return false
}
