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
	"testing"
	"time"

	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/labtest"
	"github.com/mptester/mptester/mphttp"
	"github.com/mptester/mptester/patterns"
	"github.com/mptester/mptester/probe"
)

const labHTTPPort = 8081

// startLabHTTP serves the bulk object (ranges, ETag) at /bulk/{size} over
// plain HTTP, as Fleety's CDN servers did (003 §7: HTTP only), on the
// lab's server address.
func startLabHTTP(t *testing.T, l *labtest.Lab) { serveLabBulk(t, l, labHTTPPort, false) }

// serveLabBulk serves /bulk/{size} on port, its listener MPTCP-capable
// when mptcp is set.
func serveLabBulk(t *testing.T, l *labtest.Lab, port int, mptcp bool) {
	if labtest.IsChild() {
		return
	}
	ln, err := l.Lab.ListenTCP(fmt.Sprintf(":%d", port), mptcp)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /bulk/{size}", func(w http.ResponseWriter, r *http.Request) {
		var size int64
		fmt.Sscan(r.PathValue("size"), &size)
		patterns.ServeBulk(w, r, size)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

func labPath(l *labtest.Lab, t *testing.T, name string) mphttp.Path {
	p := l.Path(t, name)
	addr := netip.AddrPortFrom(lab.Server4, labHTTPPort).String()
	return mphttp.Path{Name: name, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return probe.DialContext(ctx, p, "tcp", addr)
		},
		DisableCompression: true,
	}}
}

// labFetch downloads size bytes over paths and checks the bytes.
func labFetch(t *testing.T, size int64, tol time.Duration, paths ...mphttp.Path) *mphttp.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h := &checkWriter{want: patterns.NewBulkBody(size)}
	res, err := mphttp.Fetch(ctx, fmt.Sprintf("http://%s:%d/bulk/%d", lab.Server4, labHTTPPort, size), h, mphttp.Options{Paths: paths, Tolerance: tol})
	if err != nil {
		t.Fatalf("fetch over %d paths: %v (%+v)", len(paths), err, res)
	}
	if h.bad >= 0 || h.n != size {
		t.Fatalf("output: %d bytes, first difference at %d, want %d bytes", h.n, h.bad, size)
	}
	return res
}

// checkWriter compares the output with the object as it is written.
type checkWriter struct {
	want io.Reader
	n    int64
	bad  int64
	buf  []byte
}

func (c *checkWriter) Write(p []byte) (int, error) {
	if c.n == 0 {
		c.bad = -1
	}
	if cap(c.buf) < len(p) {
		c.buf = make([]byte, len(p))
	}
	w := c.buf[:len(p)]
	if _, err := io.ReadFull(c.want, w); err != nil {
		return 0, err
	}
	for i := range p {
		if p[i] != w[i] && c.bad < 0 {
			c.bad = c.n + int64(i)
		}
	}
	c.n += int64(len(p))
	return len(p), nil
}

// TestLabAggregation: 003 §6.3's micro-benchmark. Both paths 50 ms RTT,
// rate-limited by the lab's emulator; the single-path throughputs are
// measured in the same run, and the aggregation rate is the multipath
// throughput over their sum. Fleety: 71.6% for 10 MB. Then a fast Wi-Fi
// (no rate limit) that alone finishes within the tolerance: the cellular
// path carries no payload.
func TestLabAggregation(t *testing.T) {
	l := labtest.Start(t, lab.Options{Domains: 0, Seed: 15})
	startLabHTTP(t, l)
	const wifiMbit, cellMbit = 40, 20
	l.Set(t, "wlan0", "delay=25ms", "jitter=0s", "loss=0", fmt.Sprintf("rate=%dmbit", wifiMbit))
	l.Set(t, "wwan0", "delay=25ms", "jitter=0s", "loss=0", fmt.Sprintf("rate=%dmbit", cellMbit))
	if l.InClient(t) {
		const size = 10_000_000
		wifi, cell := labPath(l, t, "wlan0"), labPath(l, t, "wwan0")
		rw := labFetch(t, size, time.Second, wifi).RateBps
		rc := labFetch(t, size, time.Second, cell).RateBps
		// New clients: no warm connections from the single-path runs.
		wifi, cell = labPath(l, t, "wlan0"), labPath(l, t, "wwan0")
		mp := labFetch(t, size, time.Second, wifi, cell)
		agg := mp.RateBps / (rw + rc)
		t.Logf("10 MB at 50 ms RTT: Wi-Fi alone %.1f Mbit/s, cellular alone %.1f Mbit/s, MPHTTP %.1f Mbit/s in %v: aggregation %.1f%% (Fleety 71.6%%); Wi-Fi carried %d B, cellular %d B; %s, %d portions, peak buffer %d B",
			rw/1e6, rc/1e6, mp.RateBps/1e6, mp.Duration.Round(time.Millisecond), 100*agg, mp.Paths[0].Bytes, mp.Paths[1].Bytes, mp.Consistency, mp.Portions, mp.PeakBuffered)
		t.Logf("paths %+v", mp.Paths)
		if mp.Consistency != mphttp.Verified || mp.Paths[1].Bytes == 0 {
			t.Errorf("both paths should carry the object, verified: %+v", mp)
		}
		if agg < 0.716 {
			t.Errorf("aggregation rate %.1f%%, below Fleety's 71.6%%", 100*agg)
		}
	}

	// Fast Wi-Fi: no rate limit. The tolerance is set from the measured
	// Wi-Fi-alone time (2x), so "Wi-Fi alone finishes within the
	// tolerance" holds by construction whatever the machine's speed.
	l.Set(t, "wlan0", "rate=0")
	if l.InClient(t) {
		const size = 10_000_000
		alone := labFetch(t, size, time.Second, labPath(l, t, "wlan0"))
		tol := max(time.Second, 2*alone.Duration)
		mp := labFetch(t, size, tol, labPath(l, t, "wlan0"), labPath(l, t, "wwan0"))
		t.Logf("fast Wi-Fi: alone %v (%.1f Mbit/s), tolerance %v; MPHTTP %v, cellular received %d B in %d requests", alone.Duration.Round(time.Millisecond), alone.RateBps/1e6, tol, mp.Duration.Round(time.Millisecond), mp.Paths[1].Received, mp.Paths[1].Requests)
		if mp.Paths[1].Received != 0 || mp.Paths[1].Requests != 0 {
			t.Errorf("cellular carried %d B in %d requests with a Wi-Fi that finishes within the tolerance", mp.Paths[1].Received, mp.Paths[1].Requests)
		}
	}
}

// TestLabAggregationLarge: the large-file points of 003 §6.3 (Fleety,
// 500 MB: 91.4% / 85.5% at 50 / 5 Mbit/s Wi-Fi) with 50 MB, the most that
// fits a test's time here, cellular 20 Mbit/s, 50 ms RTT, and a 16 MB
// memory cap so the download runs in portions. Single-path rates are
// measured in the same run. The memory bound, the bytes and a floor on
// the aggregation rate are checked; Fleety's figures are held at 500 MB
// by TestLabAggregationLargeBench (a benchmark: minutes).
func TestLabAggregationLarge(t *testing.T) {
	l := labtest.Start(t, lab.Options{Domains: 0, Seed: 17})
	startLabHTTP(t, l)
	for _, wifiMbit := range labLargeRates() {
		l.Set(t, "wlan0", "delay=25ms", "jitter=0s", "loss=0", fmt.Sprintf("rate=%dmbit", wifiMbit))
		l.Set(t, "wwan0", "delay=25ms", "jitter=0s", "loss=0", "rate=20mbit")
		if l.InClient(t) {
			const size, memCap = 50_000_000, 16 << 20
			// Single paths over at least ~8 s each so slow start is a few
			// percent of it: the whole object at 50 Mbit/s, 10 MB at 5.
			rw := labFetch(t, min(size, int64(wifiMbit)*1e6/8*16), time.Second, labPath(l, t, "wlan0")).RateBps
			rc := labFetch(t, 20_000_000, time.Second, labPath(l, t, "wwan0")).RateBps
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if os.Getenv("MPHTTP_TRACE") != "" {
				mphttp.SetTrace(t.Logf)
				defer mphttp.SetTrace(nil)
			}
			h := &checkWriter{want: patterns.NewBulkBody(size)}
			mp, err := mphttp.Fetch(ctx, fmt.Sprintf("http://%s:%d/bulk/%d", lab.Server4, labHTTPPort, size), h,
				mphttp.Options{Paths: []mphttp.Path{labPath(l, t, "wlan0"), labPath(l, t, "wwan0")}, MemoryCap: memCap})
			if err != nil || h.bad >= 0 || h.n != size {
				t.Fatalf("%v: %d bytes, first difference at %d", err, h.n, h.bad)
			}
			agg := mp.RateBps / (rw + rc)
			t.Logf("50 MB, Wi-Fi %d Mbit/s: Wi-Fi alone %.1f Mbit/s, cellular alone %.1f, MPHTTP %.1f in %v: aggregation %.1f%%; Wi-Fi %d B, cellular %d B; %s, %d portions, peak buffer %d B",
				wifiMbit, rw/1e6, rc/1e6, mp.RateBps/1e6, mp.Duration.Round(time.Millisecond), 100*agg, mp.Paths[0].Bytes, mp.Paths[1].Bytes, mp.Consistency, mp.Portions, mp.PeakBuffered)
			if mp.PeakBuffered > mp.PortionMax || mp.PortionMax > memCap || mp.Portions < 2 {
				t.Errorf("peak buffer %d (cap %d), %d portions", mp.PeakBuffered, memCap, mp.Portions)
			}
			// 50 MB pays a start (path 2 waits until path 1's rate is
			// known) and one reconnect of path 1 that 500 MB spreads
			// thin; 85% is what the scheduler reached before connections
			// were kept across portions (84.7-88.7%), as a floor.
			if agg < 0.85 {
				t.Errorf("aggregation %.1f%% at 50 MB, below the 85%% floor", 100*agg)
			}
		}
	}
}

func labLargeRates() []int {
	if s := os.Getenv("MPHTTP_WIFI"); s != "" {
		var v int
		fmt.Sscan(s, &v)
		return []int{v}
	}
	return []int{50, 5}
}
