package survey

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mptester/mptester/probe"
)

// DiscoverFunc lists the host's paths (probe.Discover in production).
type DiscoverFunc func(ctx context.Context) ([]probe.Path, error)

// watcher polls the paths and remembers when each went down or changed
// address; records finished after that are invalid.
type watcher struct {
	mu      sync.Mutex
	invalid map[string]InvalidPathRecord
}

func newWatcher() *watcher { return &watcher{invalid: map[string]InvalidPathRecord{}} }

func (w *watcher) run(ctx context.Context, discover DiscoverFunc, every time.Duration, initial []probe.Path) {
	if discover == nil {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now, err := discover(ctx)
		if err != nil {
			continue
		}
		w.check(initial, now, time.Now())
	}
}

func (w *watcher) check(initial, now []probe.Path, at time.Time) {
	for _, p := range initial {
		reason := ""
		q, err := probe.FindPath(now, p.Name)
		switch {
		case err != nil:
			reason = "interface disappeared"
		case !q.Up:
			reason = "interface went down"
		case !sameAddrs(p, q):
			reason = fmt.Sprintf("addresses changed from %v to %v", addrList(p), addrList(q))
		}
		if reason != "" {
			w.mark(p.Name, reason, at)
		}
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

func addrList(p probe.Path) []string {
	var s []string
	for _, a := range p.Addrs {
		s = append(s, a.IP.String())
	}
	slices.Sort(s)
	return s
}

func sameAddrs(a, b probe.Path) bool { return slices.Equal(addrList(a), addrList(b)) }
