package collect

import (
	"errors"
	"testing"
)

// A run the catch-up fails while it is still in the deriver's queue is
// one run waiting, not two; it leaves the backlog once derived.
func TestDeriveBacklogCountsARunOnce(t *testing.T) {
	var b deriveBacklog
	down := errors.New("store down")
	for _, id := range []string{"a", "b", "c"} {
		b.queue(id)
	}
	if n := b.size(); n != 3 {
		t.Fatalf("three queued runs: backlog %d", n)
	}
	// The catch-up meets all three (stored, not yet derived) and fails them.
	failed := map[string]struct{}{}
	for _, id := range []string{"a", "b", "c"} {
		b.result(id, down)
		failed[id] = struct{}{}
	}
	b.keepFailed(failed)
	if n := b.size(); n != 3 {
		t.Fatalf("three runs queued and failed: backlog %d, want 3", n)
	}
	// The deriver takes them out of the queue and fails them again.
	for _, id := range []string{"a", "b", "c"} {
		b.result(id, down)
		b.unqueue(id)
	}
	if n := b.size(); n != 3 {
		t.Fatalf("three failed runs: backlog %d, want 3", n)
	}
	b.result("a", nil)
	b.keepFailed(map[string]struct{}{"b": {}})
	if n := b.size(); n != 1 {
		t.Fatalf("one run left failing: backlog %d, want 1", n)
	}
}
