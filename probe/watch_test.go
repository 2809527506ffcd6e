package probe

import (
	"context"
	"testing"
	"time"
)

// Watch ticks at the interval it is given, returns as soon as check says
// stop, and returns when ctx ends.
func TestWatchTicksAndStops(t *testing.T) {
	calls := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		Watch(context.Background(), 10*time.Millisecond, time.Hour, func(at time.Time) bool {
			if at.IsZero() {
				t.Error("check called without a time")
			}
			calls++
			return calls < 3
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not return after check said stop")
	}
	if calls != 3 {
		t.Fatalf("check called %d times, want 3", calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	Watch(ctx, time.Hour, time.Hour, func(time.Time) bool { t.Error("check called after ctx ended"); return true })
}
