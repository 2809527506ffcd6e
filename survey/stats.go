package survey

import (
	"math"
	"slices"
	"time"
)

// ProbeStats summarises the RTTs of one target's answered probes, in ms.
type ProbeStats struct {
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Mean   float64 `json:"mean"`
	Max    float64 `json:"max"`
	Stddev float64 `json:"stddev"` // population standard deviation
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// statsOf returns the stats of xs (ms); zero for none.
func statsOf(xs []float64) ProbeStats {
	if len(xs) == 0 {
		return ProbeStats{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := mean(s)
	var v float64
	for _, x := range s {
		v += (x - m) * (x - m)
	}
	return ProbeStats{Min: s[0], Median: percentileSorted(s, 50), Mean: m, Max: s[len(s)-1],
		Stddev: math.Sqrt(v / float64(len(s)))}
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var t float64
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

// percentileSorted interpolates linearly between closest ranks, as numpy's
// default ("linear") method does: rank q/100*(n-1).
func percentileSorted(s []float64, q float64) float64 {
	switch len(s) {
	case 0:
		return 0
	case 1:
		return s[0]
	}
	r := q / 100 * float64(len(s)-1)
	lo := int(math.Floor(r))
	if lo >= len(s)-1 {
		return s[len(s)-1]
	}
	f := r - float64(lo)
	return s[lo] + f*(s[lo+1]-s[lo])
}

// rttStats summarises per-target medians for a cell.
func rttStats(medians []float64) RTTStats {
	if len(medians) == 0 {
		return RTTStats{}
	}
	s := slices.Clone(medians)
	slices.Sort(s)
	return RTTStats{Min: s[0], P10: percentileSorted(s, 10), P25: percentileSorted(s, 25),
		P50: percentileSorted(s, 50), P75: percentileSorted(s, 75), P90: percentileSorted(s, 90),
		Max: s[len(s)-1], Mean: mean(s)}
}
