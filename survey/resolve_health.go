package survey

import (
	"context"
	"time"
)

// redo decides on a finished lookup. One with a query that timed out while
// the host was dropping packets (health: an interface queue, the IP
// output, the input backlog; not the probe sockets' own receive queues)
// says nothing about the resolver: it is done again (again, after
// reprobePause) up to maxReprobes times, like a probe, and redo reports
// true. Still suspect then, it keeps its timeout and is counted (the run
// ends partial, its reason says how many). If ctx ends during the pause,
// gone is called instead of again.
func (r *runner) redo(ctx context.Context, d resolved, again, gone func()) bool {
	if !timedOut(d.rec) || !r.health.suspectHost(d.start, time.Now()) {
		return false
	}
	if d.try == maxReprobes {
		r.health.countResolution(false)
		return false
	}
	if d.try == 0 {
		r.health.countResolution(true)
	}
	time.AfterFunc(reprobePause, func() {
		if ctx.Err() != nil {
			gone()
			return
		}
		again()
	})
	return true
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
