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
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
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
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { patterns.ServeBulk(w, r, size) })}
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
		return mptcpDownload(t, l, fmt.Sprintf("http://%s:%d/obj", lab.Server4, labMPTCPPort), size)
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

// TestLabAggregationLargeBench is a benchmark (skipped unless
// MPTESTER_BENCH_MPHTTP_LARGE gives the object's size in MB): 003 §6.3's
// large-file points. Both paths 50 ms RTT, cellular 20 Mbit/s, Wi-Fi at
// each rate of MPTESTER_BENCH_MPHTTP_WIFI (Mbit/s, default "50,5,0.5"),
// the default memory cap (64 MiB) and portion time (10 s), tolerance 1 s.
// Per Wi-Fi rate: Wi-Fi alone and cellular alone (each over ~20 s of
// transfer, so slow start weighs little), MPHTTP over both (bytes checked
// against the object), then kernel MPTCP over the same paths for the same
// object unless MPTESTER_BENCH_MPTCP=0. It logs the aggregation rates, the
// paths' shares, the portions, the peak reassembly buffer against §4.2's
// bound min(M, (R₁+R₂)·T), and the peak Go heap during the download.
//
//	MPTESTER_BENCH_MPHTTP_LARGE=500 go test -p 1 -count 1 -v -timeout 60m -run LabAggregationLargeBench ./mphttp
func TestLabAggregationLargeBench(t *testing.T) {
	mb, _ := strconv.Atoi(os.Getenv("MPTESTER_BENCH_MPHTTP_LARGE"))
	if mb <= 0 {
		t.Skip("benchmark: set MPTESTER_BENCH_MPHTTP_LARGE=MB")
	}
	rates := []float64{50, 5, 0.5}
	if s := os.Getenv("MPTESTER_BENCH_MPHTTP_WIFI"); s != "" {
		rates = nil
		for _, f := range strings.Split(s, ",") {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil || v <= 0 {
				t.Fatalf("MPTESTER_BENCH_MPHTTP_WIFI: %q is not a rate in Mbit/s", f)
			}
			rates = append(rates, v)
		}
	}
	withMPTCP := os.Getenv("MPTESTER_BENCH_MPTCP") != "0"
	fleety := map[float64]float64{50: 91.42, 5: 85.53, 0.5: 75.35} // 003 §6.3, 500 MB
	l := labtest.Start(t, lab.Options{Domains: 0, Seed: 21})
	serveLabBulk(t, l, labHTTPPort, false)
	serveLabBulk(t, l, labMPTCPPort, true)
	const cellMbit = 20
	size := int64(mb) * 1_000_000
	for _, wifi := range rates {
		l.Set(t, "wlan0", "delay=25ms", "jitter=0s", "loss=0", fmt.Sprintf("rate=%gkbit", wifi*1000))
		l.Set(t, "wwan0", "delay=25ms", "jitter=0s", "loss=0", fmt.Sprintf("rate=%dmbit", cellMbit))
		if !l.InClient(t) {
			continue
		}
		ref := func(mbit float64) int64 { return min(size, int64(mbit*1e6/8*20)) }
		rw := labFetch(t, ref(wifi), time.Second, labPath(l, t, "wlan0")).RateBps
		rc := labFetch(t, ref(cellMbit), time.Second, labPath(l, t, "wwan0")).RateBps
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		if os.Getenv("MPHTTP_TRACE") != "" {
			mphttp.SetTrace(t.Logf)
		}
		heap := peakHeap()
		h := &checkWriter{want: patterns.NewBulkBody(size)}
		mp, err := mphttp.Fetch(ctx, fmt.Sprintf("http://%s:%d/bulk/%d", lab.Server4, labHTTPPort, size), h,
			mphttp.Options{Paths: []mphttp.Path{labPath(l, t, "wlan0"), labPath(l, t, "wwan0")}, Tolerance: time.Second})
		peak := heap()
		mphttp.SetTrace(nil)
		cancel()
		if err != nil || h.bad >= 0 || h.n != size {
			t.Fatalf("mphttp: %v: %d bytes, first difference at %d", err, h.n, h.bad)
		}
		agg := mp.RateBps / (rw + rc)
		bound := min(int64(mphttp.DefaultMemoryCap), int64((rw+rc)/8*mphttp.DefaultPortionTime.Seconds()))
		t.Logf("%d MB, Wi-Fi %g Mbit/s: Wi-Fi alone %.2f Mbit/s, cellular alone %.2f; MPHTTP %.2f in %v: aggregation %.1f%% (Fleety %.1f%% at 500 MB); Wi-Fi %.1f MB (%.1f%% of what it carries alone in that time), cellular %.1f MB (%.1f%%); %s, %d portions, %d+%d requests, peak buffer %.1f MB (largest portion %.1f MB; min(M, (R1+R2)T) from the single-path rates %.1f MB), peak heap %.1f MB",
			mb, wifi, rw/1e6, rc/1e6, mp.RateBps/1e6, mp.Duration.Round(time.Millisecond), 100*agg, fleety[wifi],
			float64(mp.Paths[0].Bytes)/1e6, 100*float64(mp.Paths[0].Bytes)*8/(rw*mp.Duration.Seconds()),
			float64(mp.Paths[1].Bytes)/1e6, 100*float64(mp.Paths[1].Bytes)*8/(rc*mp.Duration.Seconds()),
			mp.Consistency, mp.Portions, mp.Paths[0].Requests, mp.Paths[1].Requests, float64(mp.PeakBuffered)/1e6, float64(mp.PortionMax)/1e6, float64(bound)/1e6, float64(peak)/1e6)
		// The bound holds for the rates the scheduler measured itself
		// (bound above: from the single-path runs, for the log).
		if mp.PeakBuffered > mp.PortionMax || mp.PortionMax > mphttp.DefaultMemoryCap {
			t.Errorf("peak buffer %d, largest portion %d, cap %d", mp.PeakBuffered, mp.PortionMax, mphttp.DefaultMemoryCap)
		}
		if withMPTCP {
			mt := mptcpDownload(t, l, fmt.Sprintf("http://%s:%d/bulk/%d", lab.Server4, labMPTCPPort, size), size)
			t.Logf("%d MB, Wi-Fi %g Mbit/s: MPTCP %.2f Mbit/s: aggregation %.1f%%", mb, wifi, mt/1e6, 100*mt/(rw+rc))
		}
	}
}

// mptcpDownload fetches url over one MPTCP connection started on wlan0
// (the kernel adds a wwan0 subflow) and returns its rate in bit/s.
func mptcpDownload(t *testing.T, l *labtest.Lab, url string, size int64) float64 {
	t.Helper()
	var mc *probe.MPTCPConn
	tr := &http.Transport{DisableCompression: true, DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
		c, err := probe.DialMPTCP(ctx, l.Path(t, "wlan0"), "tcp4", addr)
		if err != nil {
			return nil, err
		}
		mc = c
		return c.TCPConn, nil
	}}
	defer tr.CloseIdleConnections()
	t0 := time.Now()
	resp, err := (&http.Client{Transport: tr}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	var n countWriter
	_, err = io.Copy(&n, resp.Body)
	resp.Body.Close()
	if err != nil || int64(n) != size || mc == nil || !mc.Negotiated {
		t.Fatalf("mptcp: %v (%d bytes, negotiated %v)", err, n, mc != nil && mc.Negotiated)
	}
	return float64(size) * 8 / time.Since(t0).Seconds()
}

// peakHeap samples the Go heap's live objects every 50 ms until the
// returned function is called, which gives the largest sample.
func peakHeap() func() uint64 {
	stop, done := make(chan struct{}), make(chan uint64)
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var peak uint64
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-stop:
				done <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 { close(stop); return <-done }
}
