package analysis

import (
	"bufio"
	"container/heap"
	"encoding/binary"
	"fmt"
	"io"
	"iter"
	"math"
	"os"
	"slices"
)

// sampleChunk bounds the values a Sample holds in memory (256 KiB); past
// it, the buffer is sorted and written to a temporary file as one sorted
// run. Reading merges the runs (an external merge sort), so every quantile
// and ECDF stays exact while memory stays bounded whatever the number of
// records: a fleet's month pools millions of per-target RTTs.
const sampleChunk = 32 << 10

// Sample is a multiset of float64 values, kept exactly in bounded memory.
type Sample struct {
	buf      []float64
	n        int
	f        *os.File // sorted runs, little-endian float64s
	name     string   // the file's name while it could not be unlinked (Windows)
	runs     []int64  // each run's first value's index in f
	spilled  int64
	err      error
	chunkCap int // sampleChunk, smaller in tests
}

// Add puts v in the sample.
func (s *Sample) Add(v float64) {
	s.n++
	s.buf = append(s.buf, v)
	c := s.chunkCap
	if c == 0 {
		c = sampleChunk
	}
	if len(s.buf) >= c {
		s.spill()
	}
}

func (s *Sample) spill() {
	if s.err != nil || len(s.buf) == 0 {
		return
	}
	if s.f == nil {
		f, err := os.CreateTemp("", "mptester-report-*")
		if err != nil {
			s.err = err
			return
		}
		s.f = f
		if os.Remove(f.Name()) != nil { // unlinked while open, except on Windows
			s.name = f.Name()
		}
	}
	slices.Sort(s.buf)
	b := make([]byte, 8*len(s.buf))
	for i, v := range s.buf {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
	if _, err := s.f.WriteAt(b, 8*s.spilled); err != nil {
		s.err = err
		return
	}
	s.runs = append(s.runs, s.spilled)
	s.spilled += int64(len(s.buf))
	s.buf = s.buf[:0]
}

// Len is the number of values.
func (s *Sample) Len() int {
	if s == nil {
		return 0
	}
	return s.n
}

// Err is the first error writing or reading the spill file.
func (s *Sample) Err() error { return s.err }

// Close removes the spill file.
func (s *Sample) Close() {
	if s != nil && s.f != nil {
		s.f.Close()
		if s.name != "" {
			os.Remove(s.name)
		}
		s.f = nil
	}
}

// runReader yields one sorted run's values.
type runReader struct {
	r   *bufio.Reader
	cur float64
	b   [8]byte
}

func (r *runReader) next() bool {
	if _, err := io.ReadFull(r.r, r.b[:]); err != nil {
		return false
	}
	r.cur = math.Float64frombits(binary.LittleEndian.Uint64(r.b[:]))
	return true
}

type runHeap []*runReader

func (h runHeap) Len() int           { return len(h) }
func (h runHeap) Less(i, j int) bool { return h[i].cur < h[j].cur }
func (h runHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)        { *h = append(*h, x.(*runReader)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Sorted yields every value in ascending order, merging the spilled runs
// with the in-memory buffer.
func (s *Sample) Sorted() iter.Seq[float64] {
	return func(yield func(float64) bool) {
		if s == nil || s.err != nil {
			return
		}
		slices.Sort(s.buf)
		if len(s.runs) == 0 {
			for _, v := range s.buf {
				if !yield(v) {
					return
				}
			}
			return
		}
		h := &runHeap{}
		for i, start := range s.runs {
			end := s.spilled
			if i+1 < len(s.runs) {
				end = s.runs[i+1]
			}
			r := &runReader{r: bufio.NewReaderSize(io.NewSectionReader(s.f, 8*start, 8*(end-start)), 4096)}
			if r.next() {
				*h = append(*h, r)
			}
		}
		heap.Init(h)
		bi := 0
		for h.Len() > 0 || bi < len(s.buf) {
			var v float64
			if h.Len() > 0 && (bi >= len(s.buf) || (*h)[0].cur <= s.buf[bi]) {
				top := (*h)[0]
				v = top.cur
				if top.next() {
					heap.Fix(h, 0)
				} else {
					heap.Pop(h)
				}
			} else {
				v = s.buf[bi]
				bi++
			}
			if !yield(v) {
				return
			}
		}
	}
}

// Stats of the sample (zero for none), in one merge pass.
func (s *Sample) Stats() Stats {
	n := s.Len()
	if n == 0 {
		return Stats{}
	}
	ps := []float64{.1, .25, .5, .75, .9}
	want := map[int]float64{}
	for _, p := range ps {
		lo := int(p * float64(n-1))
		want[lo], want[min(lo+1, n-1)] = 0, 0
	}
	var st Stats
	var sum float64 // in sorted order, as StatsOf sums
	i := 0
	for v := range s.Sorted() {
		sum += v
		if i == 0 {
			st.Min = v
		}
		if _, ok := want[i]; ok {
			want[i] = v
		}
		st.Max = v
		i++
	}
	q := func(p float64) float64 {
		pos := p * float64(n-1)
		lo := int(pos)
		if lo >= n-1 {
			return want[n-1]
		}
		return want[lo] + (pos-float64(lo))*(want[lo+1]-want[lo])
	}
	st.P10, st.P25, st.P50, st.P75, st.P90 = q(.1), q(.25), q(.5), q(.75), q(.9)
	st.Mean = sum / float64(n)
	return st
}

// ECDF yields each distinct value with the share of values at or below it.
func (s *Sample) ECDF() iter.Seq2[float64, float64] {
	return func(yield func(float64, float64) bool) {
		n := s.Len()
		i := 0
		have := false
		var last float64
		for v := range s.Sorted() {
			if have && v != last {
				if !yield(last, float64(i)/float64(n)) {
					return
				}
			}
			last, have = v, true
			i++
		}
		if have {
			yield(last, 1)
		}
	}
}

// maxPlotSteps bounds an ECDF figure's points: past it, a step is drawn
// only where the ECDF crosses the next 1/maxPlotSteps, so the plot is off
// by less than 1/maxPlotSteps (0.05%) vertically and every drawn point is a
// data point. Tables and CSV hold every step.
const maxPlotSteps = 2000

// Series is the sample's ECDF as a figure series and whether it was thinned.
func (s *Sample) Series(name string) (Series, bool) {
	out := Series{Name: name}
	thin := s.Len() > maxPlotSteps
	level := -1
	for v, c := range s.ECDF() { // the last step (c = 1) always crosses
		if l := int(c * maxPlotSteps); !thin || l > level {
			out.X, out.Y = append(out.X, v), append(out.Y, c)
			level = l
		}
	}
	return out, thin && len(out.X) < s.Len()
}

// ecdfPart is one group of an ECDF table: its leading cells and sample.
type ecdfPart struct {
	cells []string
	s     *Sample
}

// ecdfRows makes t's rows on demand: for each part, every distinct value
// (formatted by val) with its share, read back from the sample when the
// table is written, so a long ECDF is never held as strings.
func ecdfRows(t *Table, parts []ecdfPart, val func(float64) string) {
	for _, p := range parts {
		for range p.s.ECDF() {
			t.nMore++
		}
	}
	t.more = func(yield func([]string) bool) {
		for _, p := range parts {
			for v, c := range p.s.ECDF() {
				row := append(slices.Clone(p.cells), val(v), fmt.Sprintf("%.6f", c))
				if !yield(row) {
					return
				}
			}
		}
	}
}
