package survey

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestTick: the loop sleeps about batchProbes probes' worth at the rate,
// never less than minTick nor more than sendTick.
func TestTick(t *testing.T) {
	for _, c := range []struct {
		rate float64
		want time.Duration
	}{
		{0, minTick}, {100, sendTick}, {800, sendTick}, {1000, 8 * time.Millisecond},
		{5000, 1600 * time.Microsecond}, {8000, time.Millisecond}, {100000, minTick},
	} {
		assert.Equal(t, c.want, tick(c.rate), "rate %v/s", c.rate)
	}
}
