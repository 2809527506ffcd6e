package analysis

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLTTBKeepsShape: a 10,000-point series with one planted spike keeps
// its ends and the spike in 200 points, every kept point is an input
// point, x stays increasing; short series are untouched.
func TestLTTBKeepsShape(t *testing.T) {
	n := 10000
	x, y := make([]float64, n), make([]float64, n)
	for i := range x {
		x[i] = float64(i)
		y[i] = math.Sin(float64(i) / 500)
	}
	y[4321] = 50
	ox, oy := LTTB(x, y, 200)
	require.Len(t, ox, 200)
	require.Len(t, oy, 200)
	assert.Equal(t, 0.0, ox[0])
	assert.Equal(t, float64(n-1), ox[len(ox)-1])
	assert.Contains(t, ox, 4321.0, "the spike survives")
	for i := range ox {
		assert.Equal(t, y[int(ox[i])], oy[i])
		if i > 0 {
			assert.Greater(t, ox[i], ox[i-1])
		}
	}
	sx, _ := LTTB(x[:50], y[:50], 200)
	assert.Len(t, sx, 50)
}
