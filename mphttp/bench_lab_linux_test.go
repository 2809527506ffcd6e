//go:build linux && !race

package mphttp_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/labtest"
	"github.com/mptester/mptester/mphttp"
	"github.com/mptester/mptester/patterns"
	"github.com/mptester/mptester/probe"
)

const labMPTCPPort = 8086

// TestLabAggregationVsMPTCPBench is a benchmark (skipped unless
// MPTESTER_BENCH_MPHTTP gives the number of rounds; it re-executes itself
// in the lab's client namespace, which a Benchmark cannot): 003 §6.3's aggregation rate (multipath
// rate over the sum of the single-path rates measured in the same run)
// for MPHTTP and for kernel MPTCP on the same two lab paths (50 ms RTT,
// Wi-Fi 40 Mbit/s, cellular 20 Mbit/s, no loss), the same 10 MB object
// from the same server process, plain HTTP/1.1 over each. MPTCP's
// connection starts on wlan0 and the kernel adds a wwan0 subflow (the
// lab's subflow endpoints). Medians of `reps` rounds, each round measuring
// the four downloads back to back; a fresh connection per download.
//
//	MPTESTER_BENCH_MPHTTP=5 go test -p 1 -count 1 -v -run LabAggregationVsMPTCPBench ./mphttp
func TestLabAggregationVsMPTCPBench(t *testing.T) {
	reps, _ := strconv.Atoi(os.Getenv("MPTESTER_BENCH_MPHTTP"))
	if reps <= 0 {
		t.Skip("benchmark: set MPTESTER_BENCH_MPHTTP=N")
	}
	b := t
	l := labtest.Start(t, lab.Options{Domains: 0, Seed: 19})
	const size = 10_000_000
	serve := func(port int, mptcp bool) {
		if labtest.IsChild() {
			return
		}
		ln, err := l.Lab.ListenTCP(fmt.Sprintf(":%d", port), mptcp)
		if err != nil {
			b.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("ETag", patterns.BulkETag(size))
			http.ServeContent(w, r, "", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), patterns.NewBulkBody(size))
		})}
		go srv.Serve(ln)
		b.Cleanup(func() { srv.Close() })
	}
	serve(labHTTPPort, false)
	serve(labMPTCPPort, true)
	l.Set(b, "wlan0", "delay=25ms", "jitter=0s", "loss=0", "rate=40mbit")
	l.Set(b, "wwan0", "delay=25ms", "jitter=0s", "loss=0", "rate=20mbit")
	if !l.InClient(t) {
		return
	}
	path := func(name string) probe.Path { return l.Path(t, name) }
	bound := func(name string) mphttp.Path {
		p := path(name)
		addr := netip.AddrPortFrom(lab.Server4, labHTTPPort).String()
		return mphttp.Path{Name: name, Transport: &http.Transport{DisableCompression: true,
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return probe.DialContext(ctx, p, "tcp", addr)
			}}}
	}
	url := fmt.Sprintf("http://%s:%d/obj", lab.Server4, labHTTPPort)
	mphttpRate := func(ps ...mphttp.Path) float64 {
		var n countWriter
		res, err := mphttp.Fetch(context.Background(), url, &n, mphttp.Options{Paths: ps, Tolerance: time.Second})
		if err != nil || n != size {
			b.Fatalf("mphttp: %v (%d bytes)", err, n)
		}
		return res.RateBps
	}
	mptcpRate := func() float64 {
		var mc *probe.MPTCPConn
		tr := &http.Transport{DisableCompression: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := probe.DialMPTCP(ctx, path("wlan0"), "tcp4", netip.AddrPortFrom(lab.Server4, labMPTCPPort).String())
			if err != nil {
				return nil, err
			}
			mc = c
			return c.TCPConn, nil
		}}
		defer tr.CloseIdleConnections()
		t0 := time.Now()
		resp, err := (&http.Client{Transport: tr}).Get(fmt.Sprintf("http://%s:%d/obj", lab.Server4, labMPTCPPort))
		if err != nil {
			b.Fatal(err)
		}
		var n countWriter
		_, err = io.Copy(&n, resp.Body)
		resp.Body.Close()
		if err != nil || n != size || mc == nil || !mc.Negotiated {
			b.Fatalf("mptcp: %v (%d bytes, negotiated %v)", err, n, mc != nil && mc.Negotiated)
		}
		return float64(size) * 8 / time.Since(t0).Seconds()
	}
	median := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[len(s)/2]
	}
	{
		var aggH, aggM []float64
		for i := 0; i < reps; i++ {
			rw, rc := mphttpRate(bound("wlan0")), mphttpRate(bound("wwan0"))
			mh := mphttpRate(bound("wlan0"), bound("wwan0"))
			mt := mptcpRate()
			aggH, aggM = append(aggH, mh/(rw+rc)), append(aggM, mt/(rw+rc))
			b.Logf("round %d: Wi-Fi %.1f, cellular %.1f, MPHTTP %.1f (%.1f%%), MPTCP %.1f Mbit/s (%.1f%%)",
				i+1, rw/1e6, rc/1e6, mh/1e6, 100*mh/(rw+rc), mt/1e6, 100*mt/(rw+rc))
		}
		b.Logf("median aggregation over %d rounds: MPHTTP %.1f%%, MPTCP %.1f%% (Fleety's MPHTTP at 10 MB: 71.6%%)", reps, 100*median(aggH), 100*median(aggM))
	}
}

// countWriter counts what is written (the bytes are checked elsewhere).
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }
