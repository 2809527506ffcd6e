// Package mphttp downloads one HTTP object over several paths with byte
// ranges, the MPHTTP proxy of study 003 (Fleety, §4.2-4.3): it needs
// nothing from the server but Range support. It has no socket code: the
// caller gives one http.RoundTripper per path, bound to that path (package
// probe's binding), Wi-Fi (the preferred path) first.
//
// Scheduling (003 §4.2). Path 1 asks for the whole object ("bytes=0-"), so
// the first response gives the size; it streams the object from the front
// straight to the writer. Path 2 fetches ranges from the top of the first
// portion downwards, and a chunk [lo-c, lo) is asked only when path 1, at
// its measured rate, would reach lo-c no sooner than both
//   - path 2 finishes it (RTT₂ + c/R₂): the paths finish together, the
//     split D = D₁ + D₂ with T₁ = T₂ of §4.2, re-solved after every chunk
//     from measured rates instead of solved once from estimates;
//   - the tolerance left (Wi-Fi priority): when Wi-Fi alone finishes within
//     the tolerance the cellular path carries nothing, and when the joint
//     time is under the tolerance Wi-Fi still carries what it can by then
//     (T_wifi = T_tol).
//
// Path 1 closes that first response where it meets path 2's chunks. From
// then on it asks bounded ranges, each split where it is asked so both
// paths finish together from rates measured on the warm connections, and
// path 2 fills the gap above path 1's range, then the next portion; every
// range is read to its end, so each path keeps one connection and idles
// one RTT per request instead of a new connection and slow start per
// portion. Portions (§4.2 "Buffer Overhead"): path 2's ranges lie within
// min(MemoryCap, (R₁+R₂)·PortionTime) bytes above the output's end, so at
// most that much is buffered.
//
// Consistency (§4.3): where path 1 meets path 2's lowest chunk it reads
// Overlap bytes more, which must equal the chunk's first bytes, and every
// response must carry the first one's ETag, Last-Modified and size. If
// not, path 2's data is dropped, path 1 carries on alone and the result
// says why; validators that differ stop path 2 at its response headers,
// before any of its body is read. The output is written in order and only
// ever from one object.
package mphttp

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Defaults (003 §4.2: tolerance 1 s in production).
const (
	DefaultTolerance   = time.Second
	DefaultMemoryCap   = 64 << 20
	DefaultPortionTime = 10 * time.Second
	DefaultOverlap     = 4 << 10
	minChunk           = 64 << 10
)

// Errors with their meaning; fetch maps them to exit statuses.
var (
	// ErrPathsFailed: every path failed before the object was complete.
	ErrPathsFailed = errors.New("mphttp: every path failed")
	// ErrChanged: the object changed between two requests on one path, so
	// no consistent copy can be assembled.
	ErrChanged = errors.New("mphttp: object changed during the download")
	// ErrProtocol: a response contradicts its request (range, length).
	ErrProtocol = errors.New("mphttp: protocol violation")
	// ErrStatus: the server answered the first request with an error
	// (errors.As a *StatusError for the code).
	ErrStatus = errors.New("mphttp: HTTP error status")
)

// StatusError is an error status answered to a request.
type StatusError struct {
	Code int
	Body string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s: HTTP %d: %s", ErrStatus, e.Code, e.Body)
}

func (e *StatusError) Unwrap() error { return ErrStatus }

// Path is one network path: a RoundTripper whose connections are bound to it.
type Path struct {
	Name      string
	Transport http.RoundTripper
}

// Options of a download.
type Options struct {
	// Paths, preferred (Wi-Fi) first; one or two.
	Paths []Path
	// Tolerance: path 2 is used only when path 1 alone would take longer.
	Tolerance time.Duration
	// MemoryCap bounds the bytes buffered (path 2's chunks).
	MemoryCap int64
	// PortionTime is the T of §4.2's portion size (R₁+R₂)·T.
	PortionTime time.Duration
	// Overlap is the length of the consistency check (§4.3).
	Overlap int64
	// Header is sent with every request (e.g. User-Agent).
	Header http.Header
}

// Verdicts of the consistency check.
const (
	Verified         = "verified"          // both paths used, overlap and validators equal
	SinglePath       = "single_path"       // path 2 never needed (or only one path given)
	RangesIgnored    = "ranges_ignored"    // the server answered 200 to a range: one path
	ValidatorsDiffer = "validators_differ" // path 2's ETag/Last-Modified/size differ: fell back
	OverlapDiffers   = "overlap_differs"   // path 2's bytes differ in the overlap: fell back
	PathFailed       = "path_failed"       // a path failed; the other finished alone
)

// PathResult is one path's part.
type PathResult struct {
	Name string `json:"name"`
	// Bytes of the output that came from this path.
	Bytes int64 `json:"bytes"`
	// Received: every body byte read (overlap and dropped data included).
	Received int64 `json:"received"`
	Requests int   `json:"requests"`
	// RTT: request sent to response headers, first request.
	RTT time.Duration `json:"rtt_ns"`
	// Active: time with a response being read; RateBps = Received·8/Active.
	Active  time.Duration `json:"active_ns"`
	RateBps float64       `json:"rate_bps"`
	Error   string        `json:"error,omitempty"`
}

// Result of a download. The aggregation rate (003 §6.3) is RateBps over
// the sum of the paths' single-path throughputs, measured apart.
type Result struct {
	URL      string        `json:"url"`
	Size     int64         `json:"size"` // -1 when never known
	Bytes    int64         `json:"bytes"`
	Ranges   bool          `json:"ranges"`
	ETag     string        `json:"etag,omitempty"`
	LastMod  string        `json:"last_modified,omitempty"`
	Duration time.Duration `json:"duration_ns"`
	RateBps  float64       `json:"rate_bps"`
	// PeakBuffered: most bytes held in memory at once (path 2's chunks).
	PeakBuffered int64 `json:"peak_buffered"`
	// Portions split over both paths (003 §4.2 "Buffer Overhead"), and
	// the largest portion, min(MemoryCap, (R₁+R₂)·PortionTime) from the
	// rates measured then: PeakBuffered never exceeds it.
	Portions    int    `json:"portions"`
	PortionMax  int64  `json:"portion_max"`
	Consistency string `json:"consistency"`
	// Fallback says why a path stopped being used, when one did.
	Fallback string       `json:"fallback,omitempty"`
	Paths    []PathResult `json:"paths"`
}

func (o *Options) defaults() error {
	if len(o.Paths) == 0 || len(o.Paths) > 2 {
		return fmt.Errorf("mphttp: %d paths given, want 1 or 2", len(o.Paths))
	}
	if o.Tolerance < 0 || o.MemoryCap < 0 || o.PortionTime < 0 || o.Overlap < 0 {
		return errors.New("mphttp: negative option")
	}
	if o.Tolerance == 0 {
		o.Tolerance = DefaultTolerance
	}
	if o.MemoryCap == 0 {
		o.MemoryCap = DefaultMemoryCap
	}
	o.MemoryCap = max(o.MemoryCap, 2*minChunk)
	if o.PortionTime == 0 {
		o.PortionTime = DefaultPortionTime
	}
	if o.Overlap == 0 {
		o.Overlap = DefaultOverlap
	}
	// Every chunk is longer than the overlap, so an overlap lies in one.
	o.Overlap = min(o.Overlap, minChunk/4)
	return nil
}

// object identifies the version of the object being assembled.
type object struct {
	size          int64
	etag, lastMod string
}

// same: equal where both responses say something (§4.3: validators are
// optional, so the overlap is the check that always applies).
func (a object) same(b object) bool {
	return a.size == b.size && (a.etag == "" || b.etag == "" || a.etag == b.etag) &&
		(a.lastMod == "" || b.lastMod == "" || a.lastMod == b.lastMod)
}

// response is one opened range response.
type response struct {
	body  io.ReadCloser
	first int64 // offset of the body's first byte
	end   int64 // offset after its last byte
	obj   object
	full  bool // 200: the whole object, ranges ignored
	rtt   time.Duration
}

// open asks path p for bytes [first, end) (end < 0: to the end).
func open(ctx context.Context, p *pathState, url string, hdr http.Header, first, end int64) (*response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	spec := "bytes=" + strconv.FormatInt(first, 10) + "-"
	if end >= 0 {
		spec += strconv.FormatInt(end-1, 10)
	}
	req.Header.Set("Range", spec)
	// Content-Encoding would make ranges apply to the encoded bytes.
	req.Header.Set("Accept-Encoding", "identity")
	p.res.Requests++
	start := time.Now()
	resp, err := p.path.Transport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	r := &response{body: resp.Body, rtt: time.Since(start),
		obj: object{etag: resp.Header.Get("ETag"), lastMod: resp.Header.Get("Last-Modified")}}
	if p.res.RTT == 0 {
		p.res.RTT = r.rtt
	}
	switch resp.StatusCode {
	case http.StatusOK:
		r.full, r.first, r.end, r.obj.size = true, 0, resp.ContentLength, resp.ContentLength
		return r, nil
	case http.StatusPartialContent:
	case http.StatusRequestedRangeNotSatisfiable:
		// "bytes=0-" of an empty object.
		if first == 0 && resp.Header.Get("Content-Range") == "bytes */0" {
			resp.Body.Close()
			r.body, r.obj.size = http.NoBody, 0
			return r, nil
		}
		fallthrough
	default:
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		resp.Body.Close()
		return nil, &StatusError{Code: resp.StatusCode, Body: strings.TrimSpace(string(msg))}
	}
	a, b, size, ok := parseContentRange(resp.Header.Get("Content-Range"))
	if !ok || a != first || (end >= 0 && b+1 > end) || (resp.ContentLength >= 0 && resp.ContentLength != b+1-a) {
		resp.Body.Close()
		return nil, fmt.Errorf("%w: asked %s, got Content-Range %q, Content-Length %d", ErrProtocol, spec, resp.Header.Get("Content-Range"), resp.ContentLength)
	}
	r.first, r.end, r.obj.size = a, b+1, size
	return r, nil
}

// parseContentRange parses "bytes a-b/size" (size "*" → -1).
func parseContentRange(s string) (a, b, size int64, ok bool) {
	rest, found := strings.CutPrefix(s, "bytes ")
	if !found {
		return 0, 0, 0, false
	}
	rng, total, found := strings.Cut(rest, "/")
	as, bs, found2 := strings.Cut(rng, "-")
	if !found || !found2 {
		return 0, 0, 0, false
	}
	var err1, err2, err3 error
	a, err1 = strconv.ParseInt(as, 10, 64)
	b, err2 = strconv.ParseInt(bs, 10, 64)
	size = -1
	if total != "*" {
		size, err3 = strconv.ParseInt(total, 10, 64)
	}
	if err1 != nil || err2 != nil || err3 != nil || a < 0 || b < a || (size >= 0 && b >= size) {
		return 0, 0, 0, false
	}
	return a, b, size, true
}

// pathState is a path's running state.
type pathState struct {
	path Path
	res  *PathResult
	dead bool
}

// meter estimates a reader's rate over a recent window.
type meter struct {
	t []time.Time
	n []int64
}

func (m *meter) add(now time.Time, total int64) {
	m.t, m.n = append(m.t, now), append(m.n, total)
	if len(m.t) > 4096 {
		m.t, m.n = m.t[2048:], m.n[2048:]
	}
}

// rate in bytes/s over the last win, and over the win before it.
func (m *meter) rate(now time.Time, win time.Duration) (last, prev float64, ok bool) {
	at := func(t time.Time) (int64, bool) {
		for i := len(m.t) - 1; i >= 0; i-- {
			if !m.t[i].After(t) {
				return m.n[i], true
			}
		}
		return 0, false
	}
	if len(m.n) == 0 {
		return 0, 0, false
	}
	cur := m.n[len(m.n)-1]
	n1, ok1 := at(now.Add(-win))
	if !ok1 {
		return 0, 0, false
	}
	last = float64(cur-n1) / win.Seconds()
	if n2, ok2 := at(now.Add(-2 * win)); ok2 {
		prev = float64(n1-n2) / win.Seconds()
	}
	return last, prev, true
}

// chunk is a range of path 2 (data filled when done).
type chunk struct {
	p      *pathState
	lo, hi int64
	start  time.Time
	cancel context.CancelFunc
	done   bool
	data   []byte
	err    error
	// differs: the response's validators are not the object's; its body
	// was not read (§4.3: the headers alone tell).
	differs bool
	took    time.Duration
	rtt     time.Duration
	obj     object
}

// Fetch downloads url over o.Paths into w, in order.
func Fetch(ctx context.Context, url string, w io.Writer, o Options) (*Result, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	f := &fetcher{o: o, url: url, w: w, res: &Result{URL: url, Size: -1, Consistency: SinglePath}}
	for _, p := range o.Paths {
		f.res.Paths = append(f.res.Paths, PathResult{Name: p.Name})
	}
	for i := range o.Paths {
		f.paths = append(f.paths, &pathState{path: o.Paths[i], res: &f.res.Paths[i]})
	}
	start := time.Now()
	err := f.run(ctx, start)
	f.res.Duration = time.Since(start)
	if f.res.Duration > 0 {
		f.res.RateBps = float64(f.res.Bytes) * 8 / f.res.Duration.Seconds()
	}
	for i := range f.res.Paths {
		if p := &f.res.Paths[i]; p.Active > 0 {
			p.RateBps = float64(p.Received) * 8 / p.Active.Seconds()
		}
	}
	return f.res, err
}

type fetcher struct {
	o     Options
	url   string
	w     io.Writer
	res   *Result
	paths []*pathState
	obj   object
	// tail holds the last Overlap bytes written, to check a path taking
	// over from another one.
	tail []byte
}

func (f *fetcher) write(p []byte, from *pathState) error {
	if _, err := f.w.Write(p); err != nil {
		return fmt.Errorf("mphttp: writing the output: %w", err)
	}
	f.res.Bytes += int64(len(p))
	from.res.Bytes += int64(len(p))
	ov := int(f.o.Overlap)
	if len(p) >= ov {
		f.tail = append(f.tail[:0], p[len(p)-ov:]...)
	} else {
		f.tail = append(f.tail, p...)
		f.tail = f.tail[max(0, len(f.tail)-ov):]
	}
	return nil
}

func (f *fetcher) fallback(verdict, why string) {
	if f.res.Fallback == "" {
		f.res.Consistency, f.res.Fallback = verdict, why
	}
}

// front is the sequential reader: a response whose bytes go to the output.
type front struct {
	p    *pathState
	r    *response
	pos  int64 // next offset to read
	m    meter
	t0   time.Time
	read int64
	// open: the response runs to the object's end (the first one, or a
	// path taking over); it is closed where it meets path 2. Otherwise
	// it is a bounded range [.., stop+Overlap) read to its end, so the
	// connection stays open for the next one.
	open bool
	stop int64
}

func (fr *front) close(now time.Time) {
	if fr.r != nil {
		fr.r.body.Close()
		fr.p.res.Active += now.Sub(fr.t0)
		fr.r = nil
	}
}

func (f *fetcher) run(ctx context.Context, start time.Time) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p1 := f.paths[0]
	r, err := open(ctx, p1, f.url, f.o.Header, 0, -1)
	if err != nil && len(f.paths) > 1 {
		// path 1 cannot even start: path 2 is the only path.
		p1.dead, p1.res.Error = true, err.Error()
		f.fallback(PathFailed, p1.path.Name+": "+err.Error())
		p1 = f.paths[1]
		r, err = open(ctx, p1, f.url, f.o.Header, 0, -1)
	}
	if err != nil {
		p1.res.Error = err.Error()
		return err
	}
	f.obj = r.obj
	f.res.Size, f.res.ETag, f.res.LastMod = r.obj.size, r.obj.etag, r.obj.lastMod
	fr := &front{p: p1, r: r, t0: time.Now(), open: true}
	if r.full || r.obj.size < 0 {
		// 200, or a size the headers do not give: one path, no resume.
		if r.full {
			f.fallback(RangesIgnored, "the server answered 200 to a range request")
		}
		return f.single(fr)
	}
	f.res.Ranges = true
	return f.multi(ctx, fr, start)
}

// single copies a whole-object response; its length must be the announced one.
func (f *fetcher) single(fr *front) error {
	buf := make([]byte, 256<<10)
	for {
		n, err := fr.r.body.Read(buf)
		fr.p.res.Received += int64(n)
		if werr := f.write(buf[:n], fr.p); werr != nil {
			fr.close(time.Now())
			return werr
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			fr.close(time.Now())
			fr.p.res.Error = err.Error()
			return fmt.Errorf("%w: %s at byte %d of a response without ranges: %w", ErrPathsFailed, fr.p.path.Name, f.res.Bytes, err)
		}
	}
	fr.close(time.Now())
	if f.obj.size >= 0 && f.res.Bytes != f.obj.size {
		return fmt.Errorf("%w: %d bytes, Content-Length %d", ErrProtocol, f.res.Bytes, f.obj.size)
	}
	f.res.Size = f.res.Bytes
	return nil
}

// multi runs the scheduler over [0, size), in two phases (003 §4.2):
//   - while path 1's first response is open-ended (it gave the size),
//     path 2 fetches chunks from the top of the first portion downwards,
//     each asked only when path 1 would not get there first, and path 1's
//     response is closed where it meets them: the one new connection (and
//     slow start) the download costs path 1;
//   - then path 1 asks bounded ranges, each split where it is asked so
//     both paths finish together (T₁ = T₂) from rates measured on the warm
//     connections, and path 2 fills the gap above path 1's range from the
//     top down, then looks ahead into the next portion. Every range is
//     read to its end, so both connections stay open: a path idles one
//     RTT per request, never a handshake and a slow start.
//
// Everything path 2 holds lies within one portion above the output's
// end, min(MemoryCap, (R₁+R₂)·PortionTime) bytes (§4.2 "Buffer Overhead").
func (f *fetcher) multi(ctx context.Context, fr *front, start time.Time) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	size, ov := f.obj.size, f.o.Overlap
	var back *pathState
	if len(f.paths) > 1 && f.paths[1] != fr.p {
		back = f.paths[1]
	}
	var (
		done     = make(chan *chunk, 1)
		inflight *chunk
		// chunks: path 2's ranges, in flight or done, ascending; none
		// starts below the output's end less the overlap.
		chunks  []*chunk
		held    int64 // bytes allocated to chunks
		lastTop int64 // highest chunk end so far: a higher one opens a portion
		r1, r2  float64
		rtt1    = fr.r.rtt
		rtt2    time.Duration
		// pend1: path 1's next range [output end, fr.stop+ov) is planned
		// but not asked yet (path 2 is planned in between: no idle RTT).
		pend1 bool
	)
	portion := func() int64 {
		est := r2
		if est == 0 {
			est = r1
		}
		p := max(2*minChunk, min(f.o.MemoryCap, int64((r1+est)*f.o.PortionTime.Seconds())))
		f.res.PortionMax = max(f.res.PortionMax, p)
		return p
	}
	issue := func(lo, hi int64) {
		cctx, ccancel := context.WithCancel(ctx)
		c := &chunk{p: back, lo: lo, hi: hi, start: time.Now(), cancel: ccancel}
		i, _ := slices.BinarySearchFunc(chunks, lo, func(x *chunk, lo int64) int { return cmp.Compare(x.lo, lo) })
		chunks = slices.Insert(chunks, i, c)
		inflight = c
		held += hi - lo
		f.res.PeakBuffered = max(f.res.PeakBuffered, held)
		if hi > lastTop {
			f.res.Portions++
			lastTop = hi
		}
		tracef("%v chunk [%d,%d) %d B, w %d, r1 %.1f r2 %.1f Mbit/s", time.Since(start).Round(time.Millisecond), lo, hi, hi-lo, f.res.Bytes, r1*8/1e6, r2*8/1e6)
		go func() {
			defer func() { c.took = time.Since(c.start); done <- c }()
			r, err := open(cctx, c.p, f.url, f.o.Header, c.lo, c.hi)
			if err != nil {
				c.err = err
				return
			}
			defer r.body.Close()
			c.rtt, c.obj = r.rtt, r.obj
			switch {
			case !f.obj.same(r.obj):
				// Another version: known from the headers, so not one
				// byte of its body is read.
				c.differs = true
				return
			case r.full:
				c.err = errors.New("answered 200 to a range request")
				return
			}
			c.data = make([]byte, c.hi-c.lo)
			n, err := io.ReadFull(r.body, c.data)
			c.data = c.data[:n]
			if err != nil {
				c.err = err
			}
		}()
	}
	dropBack := func(p *pathState, verdict, why string) {
		f.fallback(verdict, p.path.Name+": "+why)
		if inflight != nil {
			inflight.cancel()
		}
		chunks, held = nil, 0
		if back == p {
			back = nil
		}
	}
	// settle handles a finished chunk.
	settle := func(c *chunk) {
		if c == inflight {
			inflight = nil
		}
		c.p.res.Received += int64(len(c.data))
		c.p.res.Active += c.took
		c.cancel()
		if back != c.p {
			return // dropped meanwhile
		}
		switch {
		case c.err != nil:
			c.p.dead, c.p.res.Error = true, c.err.Error()
			// Its range goes back to path 1, which also takes the
			// chunks path 2 did finish, checked where it meets them.
			chunks = slices.DeleteFunc(chunks, func(x *chunk) bool { return x == c })
			held -= c.hi - c.lo
			f.fallback(PathFailed, c.p.path.Name+": "+c.err.Error())
			back = nil
			return
		case c.differs:
			dropBack(c.p, ValidatorsDiffer, fmt.Sprintf("ETag %q Last-Modified %q size %d, path 1 has %q %q %d", c.obj.etag, c.obj.lastMod, c.obj.size, f.obj.etag, f.obj.lastMod, f.obj.size))
			return
		}
		c.done = true
		if c.took > c.rtt {
			r2 = ewma(r2, float64(len(c.data))/(c.took-c.rtt).Seconds())
		}
		rtt2 = c.rtt
	}
	// split returns where path 1's range [w, e) should end so that both
	// paths finish together (§4.2, T₁ = T₂): path 1 asks it now, path 2
	// fills [e, g) once its chunk in flight is done.
	split := func(w, g int64, now time.Time) int64 {
		ra, rb, da, db := r1, r2, rtt1.Seconds(), rtt2.Seconds()
		if ra <= 0 {
			return g
		}
		if rb <= 0 {
			rb, db = ra, da
		}
		var t2 float64 // time path 2 is still busy
		if inflight != nil {
			t2 = max(0, db+float64(inflight.hi-inflight.lo)/rb-now.Sub(inflight.start).Seconds())
		}
		// da + (e+ov-w)/ra = t2 + db + (g-e)/rb
		e := int64((t2 + db - da + float64(g)/rb + float64(w-ov)/ra) / (1/ra + 1/rb))
		e = min(max(e, w+minChunk/4), g)
		if g-e < minChunk/4 {
			e = g
		}
		return e
	}
	buf := make([]byte, 64<<10)
	// The rate window follows the path's RTT, but the first response's
	// delay also holds the connect and the server's start (a lost SYN
	// makes it seconds): capped so the estimate is not put off.
	win := min(max(2*rtt1, 50*time.Millisecond), 250*time.Millisecond)
	plateau := false
	for f.res.Bytes < size {
		if err := ctx.Err(); err != nil {
			fr.close(time.Now())
			return err
		}
		select {
		case c := <-done:
			settle(c)
		default:
		}
		now := time.Now()
		w := f.res.Bytes
		if fr.r == nil && !pend1 {
			// Path 1 is between ranges. Path 2's chunk at the output's
			// end goes out first, once the overlap matches (§4.3).
			if len(chunks) > 0 && chunks[0].lo <= w {
				c := chunks[0]
				if !c.done {
					t0 := time.Now()
					settle(<-done)
					tracef("%v path 1 waited %v for chunk at %d", time.Since(start).Round(time.Millisecond), time.Since(t0).Round(time.Millisecond), c.lo)
					continue
				}
				ovl := w - c.lo
				if ovl > int64(len(f.tail)) || ovl > int64(len(c.data)) || !bytes.Equal(f.tail[int64(len(f.tail))-ovl:], c.data[:ovl]) {
					dropBack(c.p, OverlapDiffers, fmt.Sprintf("the %d bytes at offset %d differ from path 1's", ovl, c.lo))
					continue
				}
				if ovl > 0 && f.res.Consistency == SinglePath {
					f.res.Consistency = Verified
				}
				chunks, held = chunks[1:], held-(c.hi-c.lo)
				if err := f.write(c.data[ovl:], c.p); err != nil {
					return err
				}
				continue
			}
			g := size
			if len(chunks) > 0 {
				g = chunks[0].lo
			}
			fr.stop, pend1 = g, true
			if back != nil {
				if len(chunks) == 0 {
					g = min(size, w+portion())
				}
				fr.stop = split(w, g, now)
			}
		}
		// Plan path 2's next chunk.
		if back != nil && inflight == nil {
			if fr.open {
				f.planOpen(fr, now, start, win, &plateau, &r1, r2, rtt1, rtt2, chunks, portion, issue)
			} else {
				// The lowest gap above path 1's range within the window,
				// [lo, hi): first what path 1's split left to path 2, then
				// the next portion. Path 2 takes its top down to where
				// both would finish together, path 1 starting at lo
				// once its range is done (T₁ = T₂ again), in chunks of
				// a quarter of the portion time.
				ra, rb, da, db := r1, r2, rtt1.Seconds(), rtt2.Seconds()
				if rb == 0 {
					rb, db = ra, da
				}
				wtop := min(size, w+portion())
				lo, hi := w, wtop
				if fr.r != nil || pend1 {
					lo = fr.stop
				}
				for _, x := range chunks {
					if x.lo-lo >= minChunk/4 {
						hi = min(hi, x.lo)
						break
					}
					lo = max(lo, x.hi)
				}
				if ra > 0 && hi-lo >= minChunk/4 {
					var t1 float64 // until path 1 is at lo
					switch {
					case fr.r != nil:
						t1 = float64(fr.r.end-fr.pos) / ra
					case pend1:
						t1 = da + float64(min(size, fr.stop+ov)-w)/ra
					}
					// t1 + da + (e-lo)/ra = db + (hi-e)/rb
					e := int64((db - t1 - da + float64(hi)/rb + float64(lo)/ra) / (1/ra + 1/rb))
					c := max(minChunk, int64(rb*max(8*db, f.o.PortionTime.Seconds()/4)))
					clo := max(lo, e, hi-c)
					if clo-lo < minChunk/4 {
						clo = lo
					}
					if hi-clo >= minChunk/4 {
						issue(clo, hi)
					}
				}
			}
		}
		if pend1 {
			pend1 = false
			end := size
			if fr.stop < size {
				end = min(size, fr.stop+ov)
			}
			r, err := open(ctx, fr.p, f.url, f.o.Header, w, end)
			switch {
			case err != nil:
			case !f.obj.same(r.obj):
				r.body.Close()
				err = fmt.Errorf("%w: %s now has ETag %q Last-Modified %q size %d", ErrChanged, fr.p.path.Name, r.obj.etag, r.obj.lastMod, r.obj.size)
			case r.full:
				r.body.Close()
				err = fmt.Errorf("%w: answered 200 to a range request at byte %d", ErrProtocol, w)
			}
			if err != nil {
				fr.p.res.Error = err.Error()
				if errors.Is(err, ErrChanged) {
					return err
				}
				fr.p.dead = true
				if inflight != nil {
					settle(<-done)
				}
				nf := f.takeOver(ctx, fr, back, err)
				if nf == nil {
					return fmt.Errorf("%w: %s at byte %d: %w", ErrPathsFailed, fr.p.path.Name, w, err)
				}
				fr, back, chunks, held = nf, nil, nil, 0
				continue
			}
			rtt1 = r.rtt
			tracef("%v path 1 [%d,%d) stop %d rtt %v, inflight %v", time.Since(start).Round(time.Millisecond), w, end, fr.stop, r.rtt.Round(time.Millisecond), inflight != nil)
			fr.r, fr.pos, fr.t0, fr.read, fr.m = r, w, time.Now(), 0, meter{}
			continue
		}
		// Read path 1: an open response up to the overlap with path 2's
		// lowest chunk, a bounded one to its end (and its EOF).
		limit := fr.r.end
		if fr.open && len(chunks) > 0 {
			c := chunks[0]
			limit = c.lo + min(ov, c.hi-c.lo)
			if fr.pos >= limit {
				// Closed at once, chunk done or not: an open response
				// left waiting fills the socket's buffer with bytes
				// that are thrown away (the overlap's are in f.tail).
				fr.close(now)
				fr.open = false
				continue
			}
		}
		n, err := fr.r.body.Read(buf[:max(1, min(int64(len(buf)), limit-fr.pos))])
		if n > 0 && fr.pos+int64(n) > fr.r.end {
			n, err = 0, fmt.Errorf("%w: more bytes than the range asked", ErrProtocol)
		}
		if n > 0 {
			fr.p.res.Received += int64(n)
			if werr := f.write(buf[:n], fr.p); werr != nil {
				fr.close(time.Now())
				return werr
			}
			fr.pos += int64(n)
			fr.read += int64(n)
			fr.m.add(time.Now(), fr.read)
		}
		if err == io.EOF && fr.pos < fr.r.end {
			err = io.ErrUnexpectedEOF
		}
		if err != nil && err != io.EOF {
			fr.close(time.Now())
			fr.p.res.Error = err.Error()
			fr.p.dead = true
			if inflight != nil {
				settle(<-done)
			}
			nf := f.takeOver(ctx, fr, back, err)
			if nf == nil {
				return fmt.Errorf("%w: %s at byte %d: %w", ErrPathsFailed, fr.p.path.Name, fr.pos, err)
			}
			// path 2's finished chunks are dropped: path 2 now reads in
			// order from here (simpler than keeping them, rare).
			fr, back, chunks, held = nf, nil, nil, 0
			continue
		}
		if err == io.EOF {
			// The range is done and the connection free for the next.
			if el := time.Since(fr.t0); !fr.open && fr.read >= minChunk && el > 0 {
				r1 = ewma(r1, float64(fr.read)/el.Seconds())
			}
			fr.close(time.Now())
			fr.open = false
		}
	}
	fr.close(time.Now())
	if inflight != nil {
		inflight.cancel()
		c := <-done
		c.p.res.Received += int64(len(c.data))
		c.p.res.Active += c.took
	}
	return nil
}

// tracef logs the scheduler's decisions (set by tests).
var tracef = func(string, ...any) {}

// ewma folds a new rate measurement into an estimate (half weight: the
// paths' rates are steady, a measurement is over a whole range).
func ewma(old, v float64) float64 {
	if old == 0 {
		return v
	}
	return (old + v) / 2
}

// planOpen plans path 2's next chunk while path 1's response is open:
// a chunk [l-c, l) below path 2's lowest (or at the top of the first
// portion) is asked only when path 1, at its measured rate, would reach
// l-c no sooner than both path 2 finishes it (T₁ = T₂ over [pos, l),
// re-solved every chunk) and the tolerance left (Wi-Fi priority,
// T_wifi = T_tol).
func (f *fetcher) planOpen(fr *front, now, start time.Time, win time.Duration, plateau *bool, r1 *float64, r2 float64,
	rtt1, rtt2 time.Duration, chunks []*chunk, portion func() int64, issue func(lo, hi int64)) {
	rr, prev, ok := fr.m.rate(now, win)
	// Judge path 1 only after watching it a while (a quarter of the
	// tolerance at least): an early estimate is noise.
	watched := now.Sub(fr.t0) >= max(2*win, f.o.Tolerance/4)
	if ok && !*plateau && watched && (prev > 0 && rr < 1.25*prev || now.Sub(start) >= f.o.Tolerance) {
		*plateau = true // out of slow start: rr is the path's rate
	}
	// A stall (scheduling, a lost packet) makes one window slow; the mean
	// since the response began smooths it. The larger of the two favours
	// path 1, as Wi-Fi priority wants.
	if el := now.Sub(fr.t0); el > 0 {
		rr = max(rr, float64(fr.read)/el.Seconds())
	}
	if !ok || !*plateau || rr <= 0 {
		return
	}
	*r1 = rr
	l := min(f.obj.size, fr.pos+portion())
	if len(chunks) > 0 {
		l = chunks[0].lo
	}
	rate2, d2 := r2, rtt2
	if rate2 == 0 {
		rate2, d2 = rr, rtt1 // first chunk: assume path 1's figures
	}
	ov := f.o.Overlap
	// The largest chunk path 2 finishes before path 1 gets there:
	// c/R₂ + RTT₂ = (l - pos - overlap - c)/R₁; a chunk lasts about
	// max(8 RTT₂, 400 ms), so the split is re-solved a few times a second.
	fit := (float64(l-fr.pos-ov) - rr*d2.Seconds()) * rate2 / (rr + rate2)
	c := min(int64(fit), max(minChunk, int64(rate2*max(8*d2, 400*time.Millisecond).Seconds())))
	tolLeft := f.o.Tolerance - now.Sub(start)
	reach := time.Duration(float64(l-c-fr.pos-ov) / rr * float64(time.Second))
	if c >= minChunk/4 && reach >= tolLeft {
		issue(l-c, l)
	}
}

// takeOver moves the front's remaining range to the back path, which must
// first re-read the last Overlap bytes written and match them.
func (f *fetcher) takeOver(ctx context.Context, fr *front, back *pathState, cause error) *front {
	if back == nil || back.dead {
		return nil
	}
	f.fallback(PathFailed, fr.p.path.Name+": "+cause.Error())
	ov := int64(len(f.tail))
	from := f.res.Bytes - ov
	r, err := open(ctx, back, f.url, f.o.Header, from, -1)
	if err == nil && (!f.obj.same(r.obj) || r.full) {
		r.body.Close()
		err = fmt.Errorf("%w: ETag %q Last-Modified %q size %d", ErrChanged, r.obj.etag, r.obj.lastMod, r.obj.size)
	}
	if err == nil {
		got := make([]byte, ov)
		if _, err = io.ReadFull(r.body, got); err == nil && !bytes.Equal(got, f.tail) {
			err = fmt.Errorf("%w: the %d bytes before offset %d differ from the failed path's", ErrChanged, ov, f.res.Bytes)
		}
		back.res.Received += int64(len(got))
		if err != nil {
			r.body.Close()
		}
	}
	if err != nil {
		back.dead, back.res.Error = true, err.Error()
		return nil
	}
	return &front{p: back, r: r, pos: f.res.Bytes, t0: time.Now(), open: true}
}
