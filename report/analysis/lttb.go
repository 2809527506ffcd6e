package analysis

import "math"

// LTTB reduces a series sorted by x to at most n points for display with
// Largest-Triangle-Three-Buckets (Steinarsson 2013, "Downsampling Time
// Series for Visual Representation", ch. 4): the first and last points
// stay; every bucket between keeps the point forming the largest triangle
// with the point kept before it and the next bucket's average. Tables and
// CSV always hold every point; only figures are reduced.
func LTTB(x, y []float64, n int) ([]float64, []float64) {
	if n >= len(x) || n < 3 {
		return x, y
	}
	ox, oy := make([]float64, 0, n), make([]float64, 0, n)
	ox, oy = append(ox, x[0]), append(oy, y[0])
	every := float64(len(x)-2) / float64(n-2)
	a := 0
	for i := 0; i < n-2; i++ {
		// This bucket is [lo, hi); the next one's average is the third point.
		lo, hi := int(float64(i)*every)+1, int(float64(i+1)*every)+1
		nlo, nhi := hi, min(int(float64(i+2)*every)+1, len(x))
		if i == n-3 {
			nlo, nhi = len(x)-1, len(x)
		}
		var ax, ay float64
		for j := nlo; j < nhi; j++ {
			ax += x[j]
			ay += y[j]
		}
		ax /= float64(nhi - nlo)
		ay /= float64(nhi - nlo)
		best, area := lo, -1.0
		for j := lo; j < hi; j++ {
			s := math.Abs((x[a]-ax)*(y[j]-y[a]) - (x[a]-x[j])*(ay-y[a]))
			if s > area {
				best, area = j, s
			}
		}
		ox, oy = append(ox, x[best]), append(oy, y[best])
		a = best
	}
	return append(ox, x[len(x)-1]), append(oy, y[len(y)-1])
}
