package analysis

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSampleSpillsAndStaysExact: a sample spilled in many runs yields the
// same sorted values, stats and ECDF as the in-memory computation, with
// duplicates across runs merged into one ECDF step.
func TestSampleSpillsAndStaysExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := &Sample{chunkCap: 100}
	defer s.Close()
	var xs []float64
	for range 10007 {
		v := float64(rng.IntN(3000)) / 7 // duplicates across runs
		s.Add(v)
		xs = append(xs, v)
	}
	require.NoError(t, s.Err())
	require.Greater(t, len(s.runs), 90, "spilled")
	assert.Less(t, len(s.buf), 100)
	got := slices.Collect(s.Sorted())
	want := slices.Clone(xs)
	slices.Sort(want)
	assert.Equal(t, want, got)
	assert.Equal(t, StatsOf(xs), s.Stats())
	vals, cdf := ECDF(xs)
	var gv, gc []float64
	for v, c := range s.ECDF() {
		gv, gc = append(gv, v), append(gc, c)
	}
	assert.Equal(t, vals, gv)
	assert.InDeltaSlice(t, cdf, gc, 1e-12)
	// The plotted series: thinned to at most maxPlotSteps+1 points, each a
	// data point, within 1/maxPlotSteps of the ECDF everywhere.
	ser, thin := s.Series("x")
	assert.True(t, thin)
	assert.LessOrEqual(t, len(ser.X), maxPlotSteps+1)
	assert.Equal(t, 1.0, ser.Y[len(ser.Y)-1])
	j := 0
	for i, v := range vals {
		for j+1 < len(ser.X) && ser.X[j+1] <= v {
			j++
		}
		assert.InDelta(t, cdf[i], ser.Y[j], 1.0/maxPlotSteps+1e-9, "at %g", v)
	}
	small := &Sample{}
	small.Add(2)
	small.Add(1)
	ser, thin = small.Series("y")
	assert.False(t, thin)
	assert.Equal(t, []float64{1, 2}, ser.X)
	assert.Equal(t, []float64{0.5, 1}, ser.Y)
}
