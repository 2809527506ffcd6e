package survey

import (
	"context"
	"sync"
	"time"
)

// Limiter paces probes globally: a token bucket implemented as a virtual
// schedule. Each Wait reserves the next slot under a lock, so waiters are
// served in arrival order (no starvation) and the long-run rate never
// exceeds Rate, while up to Burst probes may go back to back after a pause.
type Limiter struct {
	mu       sync.Mutex
	interval time.Duration
	burst    time.Duration // how far the schedule may lag behind now
	next     time.Time
	now      func() time.Time
}

// NewLimiter allows rate events per second with the given burst (>= 1).
// rate <= 0 means unlimited.
func NewLimiter(rate float64, burst int) *Limiter {
	l := &Limiter{now: time.Now}
	if rate > 0 {
		l.interval = time.Duration(float64(time.Second) / rate)
		l.burst = time.Duration(max(burst, 1)-1) * l.interval
	}
	return l
}

// Rate is the current rate (0: unlimited).
func (l *Limiter) Rate() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.interval == 0 {
		return 0
	}
	return float64(time.Second) / float64(l.interval)
}

// SetRate changes the rate from the next reservation on (the health
// monitor's adaptive rate); the burst keeps its size in probes.
func (l *Limiter) SetRate(rate float64) {
	if rate <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.interval
	l.interval = time.Duration(float64(time.Second) / rate)
	if old > 0 {
		l.burst = l.burst / old * l.interval
	}
}

// Reserve returns when the caller may go, without waiting.
func (l *Limiter) Reserve() time.Time {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.interval == 0 {
		return now
	}
	if floor := now.Add(-l.burst); l.next.Before(floor) {
		l.next = floor
	}
	t := l.next
	l.next = l.next.Add(l.interval)
	if t.Before(now) {
		return now
	}
	return t
}

// take reserves the next slot if it has come by now; else it returns when
// it will. A caller that wakes every sendTick (a bit later under load)
// takes the slots that passed meanwhile: the schedule may lag up to
// takeSlack behind now, more if the burst allows.
func (l *Limiter) take(now time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.interval == 0 {
		return now, true
	}
	if floor := now.Add(-max(l.burst, takeSlack)); l.next.Before(floor) {
		l.next = floor
	}
	if l.next.After(now) {
		return l.next, false
	}
	t := l.next
	l.next = l.next.Add(l.interval)
	return t, true
}

const takeSlack = 5 * sendTick

// Wait blocks until the caller's slot or ctx's end.
func (l *Limiter) Wait(ctx context.Context) error {
	return sleepUntil(ctx, l.Reserve())
}

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := getTimer(d)
	defer putTimer(tm)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

// timers recycles the timers of the probing hot path (a spacing and a
// rate wait and a reply wait per probe): with Go 1.23 timer semantics a
// stopped timer's channel holds no stale tick, so Reset is safe.
var timers sync.Pool

func getTimer(d time.Duration) *time.Timer {
	if tm, ok := timers.Get().(*time.Timer); ok {
		tm.Reset(d)
		return tm
	}
	return time.NewTimer(d)
}

func putTimer(tm *time.Timer) {
	tm.Stop()
	timers.Put(tm)
}
