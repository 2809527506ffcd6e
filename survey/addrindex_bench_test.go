package survey

import (
	"net/netip"
	"runtime"
	"testing"
)

// BenchmarkAddrIndex1500K: a real top-1M list's ~1.5M resolved addresses
// (a third IPv6), each seen on two resolution paths and given a result
// from two probe paths, as the survey does. Reports the live heap the
// index holds (heap-B/addr), the temporary file's bytes and the cost of a
// sighting and a result (ns/op is per address).
//
//	go test -run '^$' -bench AddrIndex1500K -benchtime 1x ./survey
func BenchmarkAddrIndex1500K(b *testing.B) {
	const n = 1_500_000
	addr := func(i int) netip.Addr {
		if i%3 == 0 {
			return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 8: byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)})
		}
		return netip.AddrFrom4([4]byte{byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)})
	}
	for range b.N {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		x := newAddrIndex(2)
		for rpi := range 2 {
			for i := range n {
				ai, _ := x.insert(addr(i))
				rec := x.load(ai)
				rec.on |= 1 << rpi
				rec.path[rpi].state = targetQueued
				x.store(ai, &rec)
			}
		}
		for i := range n {
			ai, ok := x.get(addr(i))
			if !ok {
				b.Fatal("lost", addr(i))
			}
			for pi := range 2 {
				rec := x.load(ai)
				rec.path[pi].flags, rec.path[pi].medianMs = resSet|resResponsive, 12.5
				x.store(ai, &rec)
			}
		}
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if x.err != nil {
			b.Fatal(x.err)
		}
		st, _ := x.f.Stat()
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/addr")
		b.ReportMetric(float64(st.Size())/n, "file-B/addr")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/addr")
		runtime.KeepAlive(x)
		x.close()
	}
}
