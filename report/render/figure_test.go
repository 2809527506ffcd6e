package render

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot/plotter"

	"github.com/mptester/mptester/report/analysis"
)

// TestECDFIsDrawnAsExactSteps: an ECDF series is drawn post-step from 0
// at its smallest value through every (value, share) point, so the plot
// holds F at each value up to the next, never interpolating; bars keep
// their heights and labels.
func TestECDFIsDrawnAsExactSteps(t *testing.T) {
	f := analysis.Figure{Name: "x", Kind: analysis.KindECDF, Series: []analysis.Series{{Name: "a", X: []float64{1, 2.5, 4}, Y: []float64{0.25, 0.5, 1}}}}
	p, drawn, err := plotOf(f)
	require.NoError(t, err)
	var lines []*plotter.Line
	for _, pl := range drawn {
		if l, ok := pl.(*plotter.Line); ok {
			lines = append(lines, l)
		}
	}
	require.Len(t, lines, 1)
	assert.Equal(t, plotter.PostStep, lines[0].StepStyle)
	assert.Equal(t, plotter.XYs{{X: 1, Y: 0}, {X: 1, Y: 0.25}, {X: 2.5, Y: 0.5}, {X: 4, Y: 1}}, lines[0].XYs)
	assert.Equal(t, 0.0, p.Y.Min)
	assert.Equal(t, 1.0, p.Y.Max)
	assert.Less(t, p.X.Min, 1.0, "padded: the first step is not on the frame")
	assert.Greater(t, p.X.Max, 4.0)

	bars := analysis.Figure{Name: "b", Kind: analysis.KindBars, Series: []analysis.Series{{Name: "u", Y: []float64{25, 0}, Labels: []string{"w/w", "w/l"}}}}
	_, drawn, err = plotOf(bars)
	require.NoError(t, err)
	var bc *plotter.BarChart
	for _, pl := range drawn {
		if b, ok := pl.(*plotter.BarChart); ok {
			bc = b
		}
	}
	require.NotNil(t, bc)
	assert.Equal(t, plotter.Values{25, 0}, bc.Values)
}

// TestDayTicks: a month is labelled at UTC midnights, at most about eight.
func TestDayTicks(t *testing.T) {
	lo := float64(time.Date(2026, 10, 1, 5, 0, 0, 0, time.UTC).Unix())
	hi := float64(time.Date(2026, 10, 31, 0, 0, 0, 0, time.UTC).Unix())
	ts := dayTicks{}.Ticks(lo, hi)
	require.NotEmpty(t, ts)
	assert.LessOrEqual(t, len(ts), 9)
	assert.Equal(t, "10-02", ts[0].Label)
	for _, tk := range ts {
		assert.Zero(t, int64(tk.Value)%86400, tk.Label)
	}
}
