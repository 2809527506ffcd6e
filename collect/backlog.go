package collect

import "sync"

// deriveBacklog holds the runs waiting for their derived rows: queued for
// the deriver, or failed and waiting for a retry. It is a set of run ids,
// not a counter, because the catch-up can meet a run that is still in the
// queue: counted twice, the backlog /healthz and /metrics show would be
// larger than the runs that wait.
type deriveBacklog struct {
	mu     sync.Mutex
	queued map[string]int // run id -> times it is in the queue
	failed map[string]struct{}
}

// queue: a run goes into the deriver's queue (before it is sent, so the
// deriver never takes it out before it is in).
func (b *deriveBacklog) queue(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.queued == nil {
		b.queued = map[string]int{}
	}
	b.queued[id]++
}

// unqueue: the run left the queue (or never got in).
func (b *deriveBacklog) unqueue(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.queued[id] <= 1 {
		delete(b.queued, id)
		return
	}
	b.queued[id]--
}

// result records a derivation's outcome.
func (b *deriveBacklog) result(id string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil {
		delete(b.failed, id)
		return
	}
	if b.failed == nil {
		b.failed = map[string]struct{}{}
	}
	b.failed[id] = struct{}{}
}

// keepFailed: a whole catch-up pass failed exactly these runs; any other
// run it once failed has its rows now.
func (b *deriveBacklog) keepFailed(ids map[string]struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failed = ids
}

// size is how many distinct runs wait.
func (b *deriveBacklog) size() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.failed)
	for id := range b.queued {
		if _, ok := b.failed[id]; !ok {
			n++
		}
	}
	return n
}
