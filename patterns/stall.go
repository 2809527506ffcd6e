package patterns

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// DefaultStallTimeout ends a transfer that received nothing for this long.
const DefaultStallTimeout = 30 * time.Second

// ErrStalled: a transfer received nothing for its stall timeout.
var ErrStalled = errors.New("transfer stalled")

// StallError is a transfer ended because it received nothing for Timeout.
type StallError struct {
	What    string // what stalled (a URL, with the paths it used)
	At      int64  // the byte it had reached
	Timeout time.Duration
}

func (e *StallError) Error() string {
	return fmt.Sprintf("%s: nothing received for %v, stalled at byte %d", e.What, e.Timeout, e.At)
}

func (e *StallError) Unwrap() error { return ErrStalled }

// StallWatch ends a transfer's context when Progress is not called for its
// timeout: a server that stops sending mid-body, or never starts, does not
// keep the client waiting until an outer timeout (if any).
type StallWatch struct {
	last    atomic.Int64 // UnixNano of the last progress
	bytes   atomic.Int64 // the progress so far
	timeout time.Duration
	cancel  context.CancelCauseFunc
	stop    chan struct{}
	done    chan struct{}
}

// WatchStall returns a child of ctx that ends, with the error stalled
// gives (for the bytes Progress counted) as its cause, once Progress has
// not been called for timeout (counted from now); stop releases the
// watch. A timeout <= 0 watches nothing.
func WatchStall(ctx context.Context, timeout time.Duration, stalled func(at int64) error) (w *StallWatch, wctx context.Context, stop func()) {
	wctx, cancel := context.WithCancelCause(ctx)
	w = &StallWatch{timeout: timeout, cancel: cancel, stop: make(chan struct{}), done: make(chan struct{})}
	w.last.Store(time.Now().UnixNano())
	if timeout <= 0 {
		close(w.done)
		return w, wctx, func() { cancel(nil) }
	}
	go w.run(wctx, stalled)
	return w, wctx, func() {
		close(w.stop)
		<-w.done
		cancel(nil)
	}
}

func (w *StallWatch) run(ctx context.Context, stalled func(at int64) error) {
	defer close(w.done)
	t := time.NewTimer(w.timeout)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-ctx.Done():
			return
		case now := <-t.C:
			idle := now.Sub(time.Unix(0, w.last.Load()))
			if idle >= w.timeout {
				w.cancel(stalled(w.bytes.Load()))
				return
			}
			t.Reset(w.timeout - idle)
		}
	}
}

// Progress records that n > 0 bytes arrived.
func (w *StallWatch) Progress(n int) {
	if n > 0 {
		w.bytes.Add(int64(n))
		w.last.Store(time.Now().UnixNano())
	}
}

// Bytes is the progress so far.
func (w *StallWatch) Bytes() int64 { return w.bytes.Load() }
