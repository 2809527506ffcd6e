//go:build linux

package patterns

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/mptester/mptester/internal/certs"
	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/probe"
)

// cpuTime is the user+system CPU time of this process: client and server
// both run here, so it is the CPU cost of a transfer end to end.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkBulk downloads 64 MB per iteration over loopback for each
// transport and reports goodput and CPU seconds per transferred GB.
//
//	go test -run '^$' -bench Bulk -benchtime 5x ./patterns/
func BenchmarkBulk(b *testing.B) {
	const size = 64 << 20
	for _, trName := range transport.Names() {
		b.Run(trName, func(b *testing.B) {
			lo, srv := benchSetup(b)
			tr := benchTransport(b, trName, lo, srv.pin)
			cfg := srv.config("bulk", trName, probe.Family4, Params{Size: size})
			cfg.Timeout = time.Minute
			var bits, secs float64
			cpu0 := cpuTime()
			b.ResetTimer()
			for range b.N {
				rec := RunTest(context.Background(), tr, cfg, nil, nil)
				if rec.Status != StatusSuccess {
					b.Fatalf("%s: %s", rec.Status, rec.Error)
				}
				r := rec.Result.(*BulkResult)
				bits += float64(r.Bytes) * 8
				secs += r.Completion.Seconds()
			}
			cpu := cpuTime() - cpu0
			b.SetBytes(size)
			b.ReportMetric(bits/secs/1e6, "Mbit/s")
			b.ReportMetric(cpu.Seconds()/(float64(b.N)*size/1e9), "cpu-s/GB")
		})
	}
}

// BenchmarkIperf runs a 2 s upload and download per iteration.
func BenchmarkIperf(b *testing.B) {
	for _, trName := range transport.Names() {
		if !carries(trName, "iperf") {
			continue
		}
		b.Run(trName, func(b *testing.B) {
			lo, srv := benchSetup(b)
			tr := benchTransport(b, trName, lo, srv.pin)
			cfg := srv.config("iperf", trName, probe.Family4, Params{Duration: 2 * time.Second})
			var up, down float64
			var bytes uint64
			cpu0 := cpuTime()
			b.ResetTimer()
			for range b.N {
				rec := RunTest(context.Background(), tr, cfg, nil, nil)
				if rec.Status != StatusSuccess {
					b.Fatalf("%s: %s", rec.Status, rec.Error)
				}
				r := rec.Result.(*IperfResult)
				up += r.Upload.GoodputBps
				down += r.Download.GoodputBps
				bytes += r.Upload.Bytes + r.Download.Bytes
			}
			cpu := cpuTime() - cpu0
			b.ReportMetric(up/float64(b.N)/1e6, "up-Mbit/s")
			b.ReportMetric(down/float64(b.N)/1e6, "down-Mbit/s")
			b.ReportMetric(cpu.Seconds()/(float64(bytes)/1e9), "cpu-s/GB")
		})
	}
}

func benchSetup(b *testing.B) (probe.Path, *testServer) {
	b.Helper()
	lo := loopback(b)
	lim := DefaultLimits()
	lim.MaxBulk = 1 << 30
	srv, err := startBenchServer(lim)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	return lo, srv
}

func startBenchServer(lim Limits) (*testServer, error) {
	cert, pin, err := certs.SelfSigned(nil)
	if err != nil {
		return nil, err
	}
	srv, err := NewServer(ServerConfig{Certificate: cert, Listen: listenAll("127.0.0.1:0"), Limits: lim})
	if err != nil {
		return nil, err
	}
	if err := srv.Start(context.Background()); err != nil {
		return nil, err
	}
	return newTestServer(srv, pin), nil
}

func benchTransport(b *testing.B, name string, p probe.Path, pin string) transport.Transport {
	b.Helper()
	tlsCfg, err := certs.ClientTLS("localhost", pin, false)
	if err != nil {
		b.Fatal(err)
	}
	tr, err := transport.New(name, transport.Single(p, probe.Family4, tlsCfg))
	if err != nil {
		b.Fatal(err)
	}
	return tr
}
