package emu

import (
	"testing"
	"time"
)

// TestLateOverCounts: the cumulative lateness counters count each late
// delivery once per threshold it exceeds, and LabLoss adds the emulator's
// own drops (MaxInFlight overflow, write errors, the input device's drops) to the deliveries later
// than the asked lateness.
func TestLateOverCounts(t *testing.T) {
	d := &direction{}
	for _, late := range []time.Duration{0, 500 * time.Microsecond, 2 * time.Millisecond, 20 * time.Millisecond, 200 * time.Millisecond, time.Second} {
		d.recordLate(int64(late))
	}
	d.dropOverflow.Add(3)
	d.dropQueue.Add(5)
	d.writeErrs.Add(1)
	s := d.stats()
	s.DropDevice = 2
	if s.LateOver1ms != 4 || s.LateOver10ms != 3 || s.LateOver100ms != 2 {
		t.Fatalf("late over 1/10/100 ms: %d/%d/%d, want 4/3/2", s.LateOver1ms, s.LateOver10ms, s.LateOver100ms)
	}
	for _, c := range []struct {
		late time.Duration
		want uint64
	}{{time.Millisecond, 10}, {50 * time.Millisecond, 9}, {time.Second, 8}} {
		if got := s.LabLoss(c.late); got != c.want {
			t.Errorf("LabLoss(%v) = %d, want %d", c.late, got, c.want)
		}
	}
}
