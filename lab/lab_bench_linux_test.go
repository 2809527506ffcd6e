//go:build linux && !race

package lab_test

import (
	"context"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/labtest"
	"github.com/mptester/mptester/probe"
)

// Benchmarks of the lab in situ (go test -run '^$' -bench Lab ./lab):
// client sockets are created on a thread inside the client namespace
// (lab.InNS) and used from the benchmark goroutine.

func clientPath(name string) probe.Path {
	p, _ := lab.Plan(name)
	return probe.Path{Name: name, Up: true, Addrs: []probe.Addr{
		{IP: p.Client4, PrefixLen: 24, Scope: probe.ScopeGlobal},
		{IP: p.Client6, PrefixLen: 64, Scope: probe.ScopeGlobal}}}
}

func dialIn(b *testing.B, l *labtest.Lab, path, network, addr string) net.Conn {
	b.Helper()
	var c net.Conn
	err := lab.InNS(l.Config().Namespaces.Client, func() error {
		var err error
		c, err = probe.DialContext(context.Background(), clientPath(path), network, addr)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkLabRTT: UDP echo round trips through wlan0 with one-way delay
// 5 ms each way; reports how far each RTT is above the emulated 10 ms and
// how late the emulator released packets.
func BenchmarkLabRTT(b *testing.B) {
	l := labtest.Start(b, lab.Options{Domains: 0})
	l.Set(b, "wlan0", "delay=5ms")
	c := dialIn(b, l, "wlan0", "udp", netip.AddrPortFrom(lab.Server4, lab.PortEcho).String())
	defer c.Close()
	buf := make([]byte, 64)
	errs := make([]float64, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		_ = c.SetDeadline(t0.Add(time.Second))
		if _, err := c.Write(buf[:32]); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Read(buf); err != nil {
			b.Fatal(err)
		}
		errs = append(errs, float64(time.Since(t0)-10*time.Millisecond)/1e3)
	}
	b.StopTimer()
	slices.Sort(errs)
	b.ReportMetric(errs[len(errs)/2], "rtt-err-p50-µs")
	b.ReportMetric(errs[len(errs)*99/100], "rtt-err-p99-µs")
	st := l.Status(b).Paths[0].Stats
	b.ReportMetric(float64(st.Up.Lateness.Median)/1e3, "late-up-p50-µs")
	b.ReportMetric(float64(st.Up.Lateness.P99)/1e3, "late-up-p99-µs")
	b.ReportMetric(float64(st.Down.Lateness.Median)/1e3, "late-down-p50-µs")
	b.ReportMetric(float64(st.Down.Lateness.P99)/1e3, "late-down-p99-µs")
}

// BenchmarkLabThroughput: bulk TCP download through an unlimited wlan0
// (1 ms each way): what the emulator itself can carry.
func BenchmarkLabThroughput(b *testing.B) {
	benchThroughput(b, "delay=1ms")
}

// BenchmarkLabThroughput100M: the same through a 100 Mbit/s rate limit.
func BenchmarkLabThroughput100M(b *testing.B) {
	benchThroughput(b, "delay=1ms", "rate=100mbit")
}

func benchThroughput(b *testing.B, settings ...string) {
	l := labtest.Start(b, lab.Options{Domains: 0})
	l.Set(b, "wlan0", settings...)
	const n = 16 << 20
	b.SetBytes(n)
	var total time.Duration
	for i := 0; i < b.N; i++ {
		c := dialIn(b, l, "wlan0", "tcp", netip.AddrPortFrom(lab.Server4, lab.PortSrc).String())
		d, err := fetch(c, n)
		c.Close()
		if err != nil {
			b.Fatal(err)
		}
		total += d
	}
	b.ReportMetric(float64(n)*8*float64(b.N)/total.Seconds()/1e6, "Mbit/s")
}

// BenchmarkLabUpDown: building and tearing down a whole lab (namespaces,
// TUN paths, routing, MPTCP, a 1000-domain world and its DNS views).
func BenchmarkLabUpDown(b *testing.B) {
	labtest.Require(b)
	for i := 0; i < b.N; i++ {
		name := "bench" + strconv.Itoa(os.Getpid()%100000)
		l, err := lab.Up(context.Background(), lab.Options{Name: name, Dir: b.TempDir(), Domains: 1000})
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
