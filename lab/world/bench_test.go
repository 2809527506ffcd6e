package world

import (
	"runtime"
	"testing"
)

// benchGenerate reports time and allocations per Generate and the heap
// the resulting world keeps alive (live-MB) and per domain (live-B/domain).
func benchGenerate(b *testing.B, n int) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Generate(Options{Seed: int64(i), Domains: n}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w, _ := Generate(Options{Seed: 1, Domains: n})
	runtime.GC()
	runtime.ReadMemStats(&after)
	live := float64(after.HeapAlloc) - float64(before.HeapAlloc)
	b.ReportMetric(live/1e6, "live-MB")
	b.ReportMetric(live/float64(n), "live-B/domain")
	runtime.KeepAlive(w)
}

func BenchmarkGenerate10k(b *testing.B) { benchGenerate(b, 10_000) }
func BenchmarkGenerate1M(b *testing.B)  { benchGenerate(b, 1_000_000) }

func BenchmarkTruth10k(b *testing.B) {
	w, _ := Generate(Options{Seed: 1, Domains: 10_000})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := w.Truth(ExpectOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
