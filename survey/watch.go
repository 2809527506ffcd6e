package survey

import (
	"context"
	"sync"
	"time"

	"github.com/mptester/mptester/probe"
)

// DiscoverFunc lists the host's paths (probe.Discover in production).
type DiscoverFunc func(ctx context.Context) ([]probe.Path, error)

// watcher watches the paths and remembers when each went down or changed
// address; records finished after that are invalid.
type watcher struct {
	mu      sync.Mutex
	invalid map[string]InvalidPathRecord
}

func newWatcher() *watcher { return &watcher{invalid: map[string]InvalidPathRecord{}} }

// run re-discovers the paths on each kernel notification of a link, address
// or route change (probe.WatchChanges: within milliseconds on Linux) and
// every `every` (Config.WatchInterval) as a safety net for lost
// notifications and as the only trigger where there are none. A change
// found after a notification is dated by the notification, the closest
// time to the change itself. run returns only after the notification
// reader has ended.
func (w *watcher) run(ctx context.Context, discover DiscoverFunc, every time.Duration, initial []probe.Path) {
	if discover == nil {
		return
	}
	probe.Watch(ctx, every, time.Second, func(at time.Time) bool {
		if now, err := discover(ctx); err == nil {
			w.check(initial, now, at)
		}
		return true
	})
}

// check marks every initial path that changed (probe.PathChanges: the
// one definition of a path change).
func (w *watcher) check(initial, now []probe.Path, at time.Time) {
	names := make([]string, 0, len(initial))
	for _, p := range initial {
		names = append(names, p.Name)
	}
	for _, c := range probe.PathChanges(initial, now, names, false) {
		w.mark(c.Path, c.Reason, at)
	}
}

func (w *watcher) mark(path, reason string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, done := w.invalid[path]; !done {
		w.invalid[path] = InvalidPathRecord{Path: path, Reason: reason, At: at.UTC().Format(time.RFC3339Nano)}
	}
}

// valid reports whether none of paths changed so far.
func (w *watcher) valid(paths ...string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range paths {
		if _, bad := w.invalid[p]; bad {
			return false
		}
	}
	return true
}

func (w *watcher) records(order []string) []InvalidPathRecord {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []InvalidPathRecord
	for _, p := range order {
		if r, ok := w.invalid[p]; ok {
			out = append(out, r)
		}
	}
	return out
}
