package store

import (
	"encoding/binary"
	"errors"
	"math"
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
// same values give the same bytes on every backend. The counts are dense
// from bucket off (a fleet view merges tens of thousands of sketches; a
// slice adds them in a loop, a map did not).
type Sketch struct {
	N      int64
	zero   int64
	off    int32
	counts []int64
}

func sketchIndex(v float64) int32 { return int32(math.Ceil(math.Log(v) / sketchLogGamma)) }

// grow makes bucket indexes lo..hi addressable.
func (s *Sketch) grow(lo, hi int32) {
	if len(s.counts) == 0 {
		s.off, s.counts = lo, make([]int64, hi-lo+1)
		return
	}
	end := s.off + int32(len(s.counts)) - 1
	if lo >= s.off && hi <= end {
		return
	}
	nlo, nhi := min(lo, s.off), max(hi, end)
	c := make([]int64, nhi-nlo+1)
	copy(c[s.off-nlo:], s.counts)
	s.off, s.counts = nlo, c
}

// Add counts v.
func (s *Sketch) Add(v float64) {
	s.N++
	if !(v > sketchMin) { // NaN too
		s.zero++
		return
	}
	k := sketchIndex(v)
	s.grow(k, k)
	s.counts[k-s.off]++
}

// Merge adds o's counts to s.
func (s *Sketch) Merge(o *Sketch) {
	if o == nil {
		return
	}
	s.N += o.N
	s.zero += o.zero
	if len(o.counts) == 0 {
		return
	}
	s.grow(o.off, o.off+int32(len(o.counts))-1)
	d := s.counts[o.off-s.off:]
	for i, c := range o.counts {
		d[i] += c
	}
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
	last := s.off
	for i, c := range s.counts {
		if c == 0 {
			continue
		}
		last = s.off + int32(i)
		seen += c
		if rank < seen {
			break
		}
	}
	return 2 * math.Pow(sketchGamma, float64(last)) / (sketchGamma + 1)
}

// encode is the sketch's bytes: N and the zero count, then each bucket in
// index order as the index's difference from the last one and its count.
func (s *Sketch) encode(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(s.N))
	b = binary.AppendUvarint(b, uint64(s.zero))
	nb := 0
	for _, c := range s.counts {
		if c != 0 {
			nb++
		}
	}
	b = binary.AppendUvarint(b, uint64(nb))
	prev := int32(0)
	for i, c := range s.counts {
		if c == 0 {
			continue
		}
		k := s.off + int32(i)
		b = binary.AppendVarint(b, int64(k-prev))
		b = binary.AppendUvarint(b, uint64(c))
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
	type kc struct {
		k int32
		c int64
	}
	var tmp [128]kc
	ks := tmp[:0]
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
		if prev < math.MinInt32 || prev > math.MaxInt32 || (len(ks) > 0 && int32(prev) <= ks[len(ks)-1].k) {
			return nil, nil, errSketch
		}
		ks = append(ks, kc{int32(prev), int64(c)})
	}
	if len(ks) > 0 {
		if int64(ks[len(ks)-1].k)-int64(ks[0].k) > 1<<16 {
			return nil, nil, errSketch // no real figure spans that (a factor of 10^567)
		}
		s.off, s.counts = ks[0].k, make([]int64, ks[len(ks)-1].k-ks[0].k+1)
		for _, x := range ks {
			s.counts[x.k-s.off] = x.c
		}
	}
	return s, b, nil
}
