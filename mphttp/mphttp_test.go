package mphttp

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// object returns n deterministic bytes of version v.
func testObject(n int, v byte) []byte {
	b := make([]byte, n)
	x := uint32(2166136261) ^ uint32(v)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

var modTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// server is one path's server with its faults.
type server struct {
	body    []byte
	etag    string
	rate    float64 // bytes/s; 0: unlimited
	noRange bool    // answer 200 to everything
	dieAt   int64   // abort a response after this many bytes (0: never)
	lieLen  int64   // 206/200 announce this many more bytes than sent
	// firstDelay holds the first response back (a slow connect or server).
	firstDelay time.Duration
	// from the fromReq-th request on (0: never), serve laterBody (and
	// die at laterDieAt if set) instead: a fault that starts in a later
	// portion.
	fromReq    int32
	laterBody  []byte
	laterDieAt int64
	reqs       atomic.Int32
	conns      atomic.Int32 // connections accepted
	srv        *httptest.Server
}

type throttled struct {
	http.ResponseWriter
	rate    float64
	dieAt   int64
	n       int64
	started time.Time
}

func (t *throttled) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		k := min(len(p), 16<<10)
		if t.dieAt > 0 && t.n+int64(k) > t.dieAt {
			k = int(t.dieAt - t.n)
			if k <= 0 {
				if f, ok := t.ResponseWriter.(http.Flusher); ok {
					f.Flush()
				}
				panic(http.ErrAbortHandler) // the connection is cut mid-response
			}
		}
		n, err := t.ResponseWriter.Write(p[:k])
		written += n
		t.n += int64(n)
		if err != nil {
			return written, err
		}
		p = p[k:]
		if t.rate > 0 {
			if d := time.Duration(float64(t.n)/t.rate*float64(time.Second)) - time.Since(t.started); d > 0 {
				time.Sleep(d)
			}
		}
	}
	return written, nil
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.reqs.Add(1)
	if n == 1 && s.firstDelay > 0 {
		time.Sleep(s.firstDelay)
	}
	if s.etag != "" {
		w.Header().Set("ETag", s.etag)
	}
	body, dieAt := s.body, s.dieAt
	if s.fromReq > 0 && n >= s.fromReq {
		if s.laterBody != nil {
			body = s.laterBody
		}
		dieAt = s.laterDieAt
	}
	tw := &throttled{ResponseWriter: w, rate: s.rate, dieAt: dieAt, started: time.Now()}
	switch {
	case s.lieLen > 0:
		// Announce more than is sent, then end the response.
		a, b := int64(0), int64(len(s.body))-1
		if rng := r.Header.Get("Range"); rng != "" {
			var err error
			as, bs, _ := cutRange(rng)
			a, err = strconv.ParseInt(as, 10, 64)
			if err != nil {
				panic(err)
			}
			if bs != "" {
				b, _ = strconv.ParseInt(bs, 10, 64)
			}
			b = min(b, int64(len(s.body))-1)
			w.Header().Set("Content-Range", "bytes "+strconv.FormatInt(a, 10)+"-"+strconv.FormatInt(b, 10)+"/"+strconv.Itoa(len(s.body)))
			w.Header().Set("Content-Length", strconv.FormatInt(b+1-a, 10))
			w.WriteHeader(http.StatusPartialContent)
			_, _ = tw.Write(s.body[a : b+1-s.lieLen])
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(s.body)))
		_, _ = tw.Write(s.body[:int64(len(s.body))-s.lieLen])
	case s.noRange:
		w.Header().Set("Content-Length", strconv.Itoa(len(s.body)))
		_, _ = tw.Write(s.body)
	default:
		http.ServeContent(tw, r, "", modTime, bytes.NewReader(body))
	}
}

func cutRange(s string) (a, b string, ok bool) {
	s = s[len("bytes="):]
	for i := range s {
		if s[i] == '-' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func newServer(t *testing.T, s *server) *server {
	s.srv = httptest.NewUnstartedServer(s)
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s
}

// pathTo is a path whose connections all go to srv, whatever the URL says
// (as a path-bound client reaches the host over its own interface).
func pathTo(name string, s *server) Path {
	addr := s.srv.Listener.Addr().String()
	tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	return Path{Name: name, Transport: tr}
}

func fetch(t *testing.T, o Options) (*Result, []byte, error) {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := Fetch(ctx, "http://object.test/o", &out, o)
	return res, out.Bytes(), err
}

func checkOut(t *testing.T, res *Result, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("output: %d bytes, want %d (equal prefix %d); result %+v", len(got), len(want), commonPrefix(got, want), res)
	}
	if res.Bytes != int64(len(want)) || res.Paths[0].Bytes+pathBytes(res, 1) != res.Bytes {
		t.Fatalf("bytes %d, per path %+v, want %d", res.Bytes, res.Paths, len(want))
	}
}

func pathBytes(res *Result, i int) int64 {
	if i < len(res.Paths) {
		return res.Paths[i].Bytes
	}
	return 0
}

func commonPrefix(a, b []byte) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

// Two paths at 4 MB/s and 2 MB/s, tolerance 1 ms so both are wanted: both
// carry payload, split about as their rates (§4.2: finish together), the
// overlap is verified and the output is the object.
func TestSplitBothPaths(t *testing.T) {
	obj := testObject(6<<20, 1)
	a := newServer(t, &server{body: obj, etag: `"v1"`, rate: 4 << 20})
	b := newServer(t, &server{body: obj, etag: `"v1"`, rate: 2 << 20})
	res, out, err := fetch(t, Options{Paths: []Path{pathTo("wifi", a), pathTo("cell", b)}, Tolerance: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	checkOut(t, res, out, obj)
	if res.Consistency != Verified || !res.Ranges || res.Size != int64(len(obj)) {
		t.Fatalf("result %+v", res)
	}
	// 6 MiB at 4+2 MiB/s: ideal 1 s, path 2 a third. Path 2 starts late
	// (after path 1's rate is known) and in chunks, so it carries less.
	share := float64(res.Paths[1].Bytes) / float64(res.Bytes)
	if share < 0.15 || share > 0.45 {
		t.Errorf("path 2 share %.2f, want 0.15-0.45 (%+v)", share, res.Paths)
	}
	t.Logf("%v, shares %d/%d, portions %d, peak buffer %d", res.Duration, res.Paths[0].Bytes, res.Paths[1].Bytes, res.Portions, res.PeakBuffered)
}

// A first response that took long (a lost SYN, a slow server) does not
// put off the rate estimate, so path 2 still takes its share.
func TestSlowFirstResponse(t *testing.T) {
	obj := testObject(6<<20, 14)
	a := newServer(t, &server{body: obj, etag: `"v1"`, rate: 2 << 20, firstDelay: 700 * time.Millisecond})
	b := newServer(t, &server{body: obj, etag: `"v1"`, rate: 2 << 20})
	res, out, err := fetch(t, Options{Paths: []Path{pathTo("wifi", a), pathTo("cell", b)}, Tolerance: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	checkOut(t, res, out, obj)
	// Equal rates: ideally half each; path 2 starts after path 1 has
	// been watched for half a second.
	if share := float64(res.Paths[1].Bytes) / float64(res.Bytes); share < 0.25 {
		t.Errorf("path 2 share %.2f, want at least 0.25 (%+v)", share, res.Paths)
	}
}

// Wi-Fi priority (§4.2): when path 1 alone finishes within the tolerance,
// path 2 is never asked.
func TestFastWiFiNoCellular(t *testing.T) {
	obj := testObject(4<<20, 2)
	a := newServer(t, &server{body: obj, etag: `"v1"`})
	b := newServer(t, &server{body: obj, etag: `"v1"`})
	res, out, err := fetch(t, Options{Paths: []Path{pathTo("wifi", a), pathTo("cell", b)}})
	if err != nil {
		t.Fatal(err)
	}
	checkOut(t, res, out, obj)
	if b.reqs.Load() != 0 || res.Paths[1].Received != 0 || res.Consistency != SinglePath {
		t.Fatalf("cellular asked %d times, result %+v", b.reqs.Load(), res)
	}
}

// The memory cap bounds what is buffered: portions, each split.
func TestPortionsBoundMemory(t *testing.T) {
	obj := testObject(6<<20, 3)
	a := newServer(t, &server{body: obj, etag: `"v1"`, rate: 4 << 20})
	b := newServer(t, &server{body: obj, etag: `"v1"`, rate: 4 << 20})
	const cap = 512 << 10
	res, out, err := fetch(t, Options{Paths: []Path{pathTo("wifi", a), pathTo("cell", b)}, Tolerance: time.Millisecond, MemoryCap: cap})
	if err != nil {
		t.Fatal(err)
	}
	checkOut(t, res, out, obj)
	if res.Portions < 2 || res.PeakBuffered > res.PortionMax || res.PortionMax > cap || res.PeakBuffered == 0 || res.Consistency != Verified {
		t.Fatalf("portions %d, peak buffer %d (cap %d), %s", res.Portions, res.PeakBuffered, cap, res.Consistency)
	}
	// Connections stay open across portions: path 1 closes only its
	// first, open-ended response; every later range is read to its end.
	t.Logf("portions %d, requests %d/%d, connections %d/%d, peak buffer %d", res.Portions, a.reqs.Load(), b.reqs.Load(), a.conns.Load(), b.conns.Load(), res.PeakBuffered)
	if a.reqs.Load() < 3 || a.conns.Load() > 2 || b.conns.Load() > 1 {
		t.Errorf("path 1: %d requests on %d connections, path 2: %d on %d; want 2 and 1 connections", a.reqs.Load(), a.conns.Load(), b.reqs.Load(), b.conns.Load())
	}
}

// A middlebox on path 2 serves another version under the same ETag: the
// overlap differs, path 2's data is dropped, the output is path 1's object.
func TestOverlapMismatchFallsBack(t *testing.T) {
	obj := testObject(6<<20, 4)
	other := testObject(6<<20, 5)
	a := newServer(t, &server{body: obj, etag: `"v1"`, rate: 4 << 20})
	b := newServer(t, &server{body: other, etag: `"v1"`, rate: 4 << 20})
	res, out, err := fetch(t, Options{Paths: []Path{pathTo("wifi", a), pathTo("cell", b)}, Tolerance: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	checkOut(t, res, out, obj)
	if res.Consistency != OverlapDiffers || res.Fallback == "" || res.Paths[1].Bytes != 0 || res.Paths[1].Received == 0 {
		t.Fatalf("result %+v", res)
	}
}

// Path 2 serves another version with another ETag: validators differ.
func TestValidatorMismatchFallsBack(t *testing.T) {
	obj := testObject(6<<20, 6)
	a := newServer(t, &server{body: obj, etag: `"v1"`, rate: 4 << 20})
	b := newServer(t, &server{body: testObject(6<<20, 7), etag: `"v2"`, rate: 4 << 20})
	res, out, err := fetch(t, Options{Paths: []Path{pathTo("wifi", a), pathTo("cell", b)}, Tolerance: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	checkOut(t, res, out, obj)
	// The headers tell: not one byte of path 2's body is read.
	if res.Consistency != ValidatorsDiffer || res.Paths[1].Bytes != 0 || res.Paths[1].Received != 0 || b.reqs.Load() == 0 {
		t.Fatalf("result %+v", res)
	}
}

// A server that ignores Range (200): one path, whole object.
func TestRangesIgnored(t *testing.T) {
	obj := testObject(1<<20+17, 8)
	a := newServer(t, &server{body: obj, noRange: true})
	b := newServer(t, &server{body: obj, noRange: true})
	res, out, err := fetch(t, Options{Paths: []Path{pathTo("wifi", a), pathTo("cell", b)}, Tolerance: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	checkOut(t, res, out, obj)
	if res.Consistency != RangesIgnored || res.Ranges || b.reqs.Load() != 0 {
		t.Fatalf("result %+v", res)
	}
}

// Path 2 dies in the middle of its chunk: path 1 carries its range.
func TestCellularDiesMidTransfer(t *testing.T) {
	obj := testObject(6<<20, 9)
	a := newServer(t, &server{body: obj, etag: `"v1"`, rate: 4 << 20})
	b := newServer(t, &server{body: obj, etag: `"v1"`, rate: 4 << 20, dieAt: 100 << 10})
	res, out, err := fetch(t, Options{Paths: []Path{pathTo("wifi", a), pathTo("cell", b)}, Tolerance: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	checkOut(t, res, out, obj)
	if res.Consistency != PathFailed || res.Paths[1].Error == "" || b.reqs.Load() == 0 {
		t.Fatalf("result %+v", res)
	}
}

// Faults that begin in a later portion, once both paths ask bounded
// ranges: path 2 dying mid-range (its range goes back to path 1), and
// path 2 starting to serve another version under the same ETag (the
// overlap at the next meeting catches it). The output is the object.
func TestLaterPortionFaults(t *testing.T) {
	for _, c := range []struct {
		name    string
		cell    *server
		verdict string
	}{
		{"dies", &server{laterDieAt: 50 << 10}, PathFailed},
		{"changes", &server{laterBody: testObject(6<<20, 16)}, OverlapDiffers},
	} {
		t.Run(c.name, func(t *testing.T) {
			obj := testObject(6<<20, 15)
			a := newServer(t, &server{body: obj, etag: `"v1"`, rate: 4 << 20})
			c.cell.body, c.cell.etag, c.cell.rate, c.cell.fromReq = obj, `"v1"`, 4<<20, 4
			b := newServer(t, c.cell)
			res, out, err := fetch(t, Options{Paths: []Path{pathTo("wifi", a), pathTo("cell", b)}, Tolerance: time.Millisecond, MemoryCap: 512 << 10})
			if err != nil {
				t.Fatal(err)
			}
			checkOut(t, res, out, obj)
			t.Logf("%s: %s, path 2 %d B of %d received in %d requests, %d portions", res.Consistency, res.Fallback, res.Paths[1].Bytes, res.Paths[1].Received, b.reqs.Load(), res.Portions)
			if res.Consistency != c.verdict || b.reqs.Load() < 4 || res.Paths[1].Bytes == 0 {
				t.Fatalf("want %s after path 2 carried some of the object: %+v", c.verdict, res)
			}
		})
	}
}

// Path 1 dies mid-transfer: its remaining range moves to path 2, which
// re-reads the overlap first.
func TestWiFiDiesMidTransfer(t *testing.T) {
	obj := testObject(3<<20, 10)
	a := newServer(t, &server{body: obj, etag: `"v1"`, rate: 8 << 20, dieAt: 1 << 20})
	b := newServer(t, &server{body: obj, etag: `"v1"`})
	res, out, err := fetch(t, Options{Paths: []Path{pathTo("wifi", a), pathTo("cell", b)}})
	if err != nil {
		t.Fatal(err)
	}
	checkOut(t, res, out, obj)
	if res.Consistency != PathFailed || res.Paths[0].Error == "" || res.Paths[1].Bytes < 2<<20 {
		t.Fatalf("result %+v", res)
	}
}

// Path 2 announces a longer range than it sends (a lying Content-Length):
// a path failure, path 1 carries the range.
func TestLyingContentLength(t *testing.T) {
	obj := testObject(6<<20, 11)
	a := newServer(t, &server{body: obj, etag: `"v1"`, rate: 4 << 20})
	b := newServer(t, &server{body: obj, etag: `"v1"`, lieLen: 1000})
	res, out, err := fetch(t, Options{Paths: []Path{pathTo("wifi", a), pathTo("cell", b)}, Tolerance: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	checkOut(t, res, out, obj)
	if res.Consistency != PathFailed || res.Paths[1].Bytes != 0 {
		t.Fatalf("result %+v", res)
	}
	// Without ranges and with one path there is nothing to resume from:
	// a clear error, never a short object reported as complete.
	c := newServer(t, &server{body: obj, noRange: true, lieLen: 1000})
	_, _, err = fetch(t, Options{Paths: []Path{pathTo("wifi", c)}})
	if !errors.Is(err, ErrPathsFailed) {
		t.Fatalf("err %v, want ErrPathsFailed", err)
	}
}

// Both paths die: an error naming it.
func TestBothPathsDie(t *testing.T) {
	obj := testObject(3<<20, 12)
	a := newServer(t, &server{body: obj, etag: `"v1"`, dieAt: 1 << 20})
	b := newServer(t, &server{body: obj, etag: `"v1"`, dieAt: 1000})
	_, _, err := fetch(t, Options{Paths: []Path{pathTo("wifi", a), pathTo("cell", b)}})
	if !errors.Is(err, ErrPathsFailed) {
		t.Fatalf("err %v, want ErrPathsFailed", err)
	}
}

// One path only, and an empty object.
func TestSinglePathAndEmpty(t *testing.T) {
	for _, n := range []int{0, 1, 5000} {
		obj := testObject(n, 13)
		a := newServer(t, &server{body: obj, etag: `"v1"`})
		res, out, err := fetch(t, Options{Paths: []Path{pathTo("wifi", a)}})
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		checkOut(t, res, out, obj)
	}
}

func FuzzContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-99/100", "bytes 5-5/*", "bytes */0", "bytes 9-3/10", "bytes -1-2/3", "bytes 0-10/10", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, b, size, ok := parseContentRange(s)
		if ok && (a < 0 || b < a || (size >= 0 && b >= size) || size < -1) {
			t.Fatalf("%q: accepted %d-%d/%d", s, a, b, size)
		}
	})
}
