package emu

import (
	"context"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// srcDev yields n copies of a packet as fast as the link reads them, then
// blocks until closed; sinkDev counts what it is given. No per-packet
// allocation or channel, so benchmarks measure the emulator.
type srcDev struct {
	pkt    []byte
	left   atomic.Int64
	closed chan struct{}
	once   sync.Once
}

func (d *srcDev) Read(p []byte) (int, error) {
	if d.left.Add(-1) >= 0 {
		return copy(p, d.pkt), nil
	}
	<-d.closed
	return 0, os.ErrClosed
}
func (d *srcDev) Write(p []byte) (int, error) { return len(p), nil }
func (d *srcDev) Close() error                { d.once.Do(func() { close(d.closed) }); return nil }

type sinkDev struct{ srcDev }

func (d *sinkDev) Read(p []byte) (int, error) { <-d.closed; return 0, os.ErrClosed }

// BenchmarkLinkThroughput: packets/s and Mbit/s of 1400-byte IPv4 packets
// through a Link with no delay, between in-memory devices.
func BenchmarkLinkThroughput(b *testing.B) {
	src := &srcDev{pkt: udpPacket(cliAddr, srvAddr, 1400, 0), closed: make(chan struct{})}
	sink := &sinkDev{srcDev{closed: make(chan struct{})}}
	l := NewLink("bench", src, sink, 1)
	b.ResetTimer()
	src.left.Store(int64(b.N))
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- l.Run(context.Background()) }()
	for {
		s := l.Stats().Up
		if s.Delivered+s.DropQueue == uint64(b.N) {
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	el := time.Since(start)
	b.StopTimer()
	s := l.Stats().Up
	l.Close()
	<-done // Run restores GOMAXPROCS
	b.ReportMetric(float64(s.Delivered)/el.Seconds(), "pkts/s")
	b.ReportMetric(float64(s.BytesDelivered)*8/el.Seconds()/1e6, "Mbit/s")
	b.ReportMetric(float64(s.DropQueue)/float64(b.N)*100, "%dropped")
}

// BenchmarkLateness sends packets every 500 µs through a 2 ms delay and
// reports the writer's lateness (write time minus scheduled time) and the
// end-to-end one-way delay error seen by the devices (adds the reader's
// wake-up). On Linux the devices are socketpairs read like TUN fds, with
// kernel receive timestamps.
func BenchmarkLateness(b *testing.B) {
	tl := startTimedLink(b, 1)
	l := tl.Link
	const D = 2 * time.Millisecond
	l.Set(Up, Params{Delay: D})
	n := max(b.N, 200)
	b.ResetTimer()
	sentAt := paced(tl.cli, n, 500*time.Microsecond, func(s uint64) []byte { return udpPacket(cliAddr, srvAddr, 200, s) })
	got := collect(tl.inet, n, 10*time.Second)
	b.StopTimer()
	var errs []time.Duration
	for _, f := range got {
		errs = append(errs, f.t.Sub(sentAt[pktSeq(f.b)])-D)
	}
	slices.Sort(errs)
	late := l.Stats().Up.Lateness
	b.ReportMetric(float64(late.Median.Nanoseconds())/1e3, "late-p50-µs")
	b.ReportMetric(float64(late.P99.Nanoseconds())/1e3, "late-p99-µs")
	b.ReportMetric(float64(late.Max.Nanoseconds())/1e3, "late-max-µs")
	if len(errs) > 0 {
		b.ReportMetric(float64(errs[len(errs)/2].Nanoseconds())/1e3, "owd-err-p50-µs")
		b.ReportMetric(float64(errs[len(errs)*99/100].Nanoseconds())/1e3, "owd-err-p99-µs")
	}
}

// BenchmarkTableLookup: per-packet cost of the Block and SetTargetDelay
// tables holding 20k single addresses (a 10k-domain world) and 4 prefixes.
func BenchmarkTableLookup(b *testing.B) {
	var tb addrTable[time.Duration]
	for i := range 20000 {
		tb.set(netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)}), 32), time.Millisecond)
	}
	for _, p := range []string{"198.19.128.0/17", "fd00:fe::/64", "198.19.200.0/24", "fd00:ff::/64"} {
		tb.set(netip.MustParsePrefix(p), time.Millisecond)
	}
	pkts := [][]byte{
		udpPacket(cliAddr, netip.MustParseAddr("198.19.10.10"), 100, 0), // exact hit
		udpPacket(cliAddr, netip.MustParseAddr("198.19.200.7"), 100, 0), // prefix hit
		udpPacket(cli6, netip.MustParseAddr("fd00:aa::1"), 100, 0),      // miss
	}
	b.ResetTimer()
	for i := range b.N {
		_, dst, _ := ipAddrs(pkts[i%len(pkts)])
		tb.lookup(dst)
	}
}
