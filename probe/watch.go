package probe

import (
	"context"
	"time"
)

// WatchChanges (watch_linux.go, watch_other.go) tells a caller when to
// re-discover the paths.
//
// Design: the channel only says "something about links, addresses or
// routes changed at this time"; the caller re-runs Discover and compares
// with what it had. Messages are not parsed: Discover is the one source of
// truth for what a Path is, and no decoder means no decoder bugs. Where the
// OS has no notifications WatchChanges returns ErrUnsupported instead of a
// fake ticker, because every caller keeps a safety ticker anyway
// (notifications can be lost when the kernel's socket buffer overflows):
// with a nil channel the caller's select simply degrades to polling.

// Watch calls check on every change notification (WatchChanges) and on a
// safety tick: every interval if it is set, else every 5 s with
// notifications and every poll without them (the tick is then the only
// trigger). at is when the change was read, or the tick's time. Watch
// returns when ctx is done or check returns false, after the notification
// reader has ended.
func Watch(ctx context.Context, interval, poll time.Duration, check func(at time.Time) bool) {
	ctx, cancel := context.WithCancel(ctx)
	changes, err := WatchChanges(ctx)
	defer func(changes <-chan time.Time) {
		cancel()
		if err == nil {
			for range changes { // closed once the reader has ended
			}
		}
	}(changes)
	if interval <= 0 {
		interval = poll
		if err == nil {
			interval = 5 * time.Second // a safety net: notifications do the work
		}
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		var at time.Time
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-changes:
			if !ok {
				changes = nil // the socket failed: the ticker carries on
				continue
			}
			at = ev
		case at = <-tick.C:
		}
		if !check(at) {
			return
		}
	}
}
