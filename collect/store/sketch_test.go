package store

import (
	"bytes"
	"testing"
)

// FuzzDecodeSketches: a roll-up's stored bytes never panic the reader or
// allocate past their own size's worth, and what decodes encodes back to
// the same bytes.
func FuzzDecodeSketches(f *testing.F) {
	var s Sketch
	for _, v := range []float64{0, 0.5, 1, 20, 20.1, 1e4} {
		s.Add(v)
	}
	f.Add(encodeSketches(map[string]*Sketch{MetricRTT: &s, MetricGoodput: {}}))
	f.Add([]byte{})
	f.Add([]byte{3, 'r', 't', 't', 1, 0, 1, 0x7f, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeSketches(b)
		if err != nil {
			return
		}
		for _, s := range m {
			_ = s.Quantile(0.5)
			if len(s.counts) > 1<<16+1 {
				t.Fatalf("%d buckets from %d bytes", len(s.counts), len(b))
			}
		}
		// Canonical bytes (sorted names, increasing buckets) round-trip.
		if again := encodeSketches(m); bytes.Equal(again, b) {
			m2, err := decodeSketches(again)
			if err != nil || len(m2) != len(m) {
				t.Fatalf("round trip: %v", err)
			}
		}
	})
}

// TestSketchMerge: merging sketches of parts is the sketch of the whole,
// whatever the parts' ranges.
func TestSketchMerge(t *testing.T) {
	var whole, a, b Sketch
	for i := range 1000 {
		v := float64(i%97) * 1.7
		whole.Add(v)
		if i%3 == 0 {
			a.Add(v)
		} else {
			b.Add(v)
		}
	}
	var m Sketch
	m.Merge(&b)
	m.Merge(&a)
	if !bytes.Equal(m.encode(nil), whole.encode(nil)) {
		t.Fatal("merged sketch differs from the whole's")
	}
	for _, q := range []float64{0, 0.25, 0.5, 0.99, 1} {
		if m.Quantile(q) != whole.Quantile(q) {
			t.Fatalf("q%g: %g vs %g", q, m.Quantile(q), whole.Quantile(q))
		}
	}
}
