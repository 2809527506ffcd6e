package store

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
)

// SketchRelErr is a Sketch's stated error: a quantile it returns is
// within this share of the sample value at that rank (logarithmic
// buckets, as DDSketch: every value in bucket i lies in (γ^(i-1), γ^i]
// and is represented by 2γ^i/(γ+1)).
const SketchRelErr = 0.01

var (
	sketchGamma    = (1 + SketchRelErr) / (1 - SketchRelErr)
	sketchLogGamma = math.Log(sketchGamma)
)

// sketchMin: values at or below it (zero delays) share one bucket and
// read back as 0.
const sketchMin = 1e-9

// Sketch is a mergeable quantile summary of non-negative values with
// fixed logarithmic buckets: counts only, so merging is exact and the
// same values give the same bytes on every backend.
type Sketch struct {
	N       int64
	zero    int64
	buckets map[int32]int64
}

// Add counts v.
func (s *Sketch) Add(v float64) {
	s.N++
	if !(v > sketchMin) { // NaN too
		s.zero++
		return
	}
	if s.buckets == nil {
		s.buckets = map[int32]int64{}
	}
	s.buckets[int32(math.Ceil(math.Log(v)/sketchLogGamma))]++
}

// Merge adds o's counts to s.
func (s *Sketch) Merge(o *Sketch) {
	if o == nil {
		return
	}
	s.N += o.N
	s.zero += o.zero
	if len(o.buckets) > 0 && s.buckets == nil {
		s.buckets = make(map[int32]int64, len(o.buckets))
	}
	for i, c := range o.buckets {
		s.buckets[i] += c
	}
}

func (s *Sketch) keys() []int32 {
	ks := make([]int32, 0, len(s.buckets))
	for k := range s.buckets {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Quantile estimates the sample value at rank ⌊q(N−1)⌋ of the sorted
// values (the lower of the two an interpolated quantile lies between),
// within SketchRelErr; 0 for an empty sketch.
func (s *Sketch) Quantile(q float64) float64 {
	if s == nil || s.N == 0 {
		return 0
	}
	rank := int64(q * float64(s.N-1))
	if rank < s.zero {
		return 0
	}
	seen := s.zero
	ks := s.keys()
	for _, k := range ks {
		seen += s.buckets[k]
		if rank < seen {
			return 2 * math.Pow(sketchGamma, float64(k)) / (sketchGamma + 1)
		}
	}
	return 2 * math.Pow(sketchGamma, float64(ks[len(ks)-1])) / (sketchGamma + 1)
}

// encode is the sketch's bytes: N and the zero count, then each bucket in
// index order as the index's difference from the last one and its count.
func (s *Sketch) encode(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(s.N))
	b = binary.AppendUvarint(b, uint64(s.zero))
	b = binary.AppendUvarint(b, uint64(len(s.buckets)))
	prev := int32(0)
	for _, k := range s.keys() {
		b = binary.AppendVarint(b, int64(k-prev))
		b = binary.AppendUvarint(b, uint64(s.buckets[k]))
		prev = k
	}
	return b
}

var errSketch = errors.New("corrupt sketch")

func decodeSketch(b []byte) (*Sketch, []byte, error) {
	s := &Sketch{}
	next := func() uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			b = nil
			return 0
		}
		b = b[n:]
		return v
	}
	s.N, s.zero = int64(next()), int64(next())
	nb := next()
	if b == nil || nb > uint64(len(b)) {
		return nil, nil, errSketch
	}
	if nb > 0 {
		s.buckets = make(map[int32]int64, nb)
	}
	prev := int64(0)
	for range nb {
		d, n := binary.Varint(b)
		if n <= 0 {
			return nil, nil, errSketch
		}
		b = b[n:]
		c := next()
		if b == nil && c == 0 {
			return nil, nil, errSketch
		}
		prev += d
		s.buckets[int32(prev)] = int64(c)
	}
	return s, b, nil
}
