package patterns

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strconv"
	"time"

	"github.com/mptester/mptester/patterns/transport"
)

func init() {
	Register(pingPattern{})
	Register(bulkPattern{})
}

// pingBody is the 10-byte resource of 000 §II-A.
var pingBody = []byte("mptester!\n")

func randomSuffix() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func serverHost(c *Client) string {
	return c.Addr.String()
}

// exchange is the time from the request's last byte handed to the
// connection to the response's first byte read from it (httptrace
// WroteRequest -> GotFirstResponseByte): the request's round trip without
// the HTTP library's own goroutine hand-offs on the client.
type exchange struct {
	wrote, first time.Time
}

func (e *exchange) delay() (time.Duration, bool) {
	if e.wrote.IsZero() || e.first.IsZero() || e.first.Before(e.wrote) {
		return 0, false
	}
	return e.first.Sub(e.wrote), true
}

// get sends one GET and reads the whole body, returning the time to the
// first body byte and to the last one.
// A GET that receives nothing for stall (headers or body) ends with a
// *StallError.
func get(ctx context.Context, rt http.RoundTripper, url string, stall time.Duration) (ttfb, total time.Duration, n int64, proto string, err error) {
	return getTraced(ctx, rt, url, nil, stall)
}

func getTraced(ctx context.Context, rt http.RoundTripper, url string, ex *exchange, stall time.Duration) (ttfb, total time.Duration, n int64, proto string, err error) {
	w, ctx, stop := WatchStall(ctx, stall, func(at int64) error {
		return &StallError{What: "GET " + url, At: at, Timeout: stall}
	})
	defer stop()
	defer func() {
		if err != nil {
			var se *StallError
			if errors.As(context.Cause(ctx), &se) {
				err = se
			}
		}
	}()
	if ex != nil {
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			WroteRequest:         func(httptrace.WroteRequestInfo) { ex.wrote = time.Now() },
			GotFirstResponseByte: func() { ex.first = time.Now() },
		})
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, 0, "", err
	}
	start := time.Now()
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, 0, 0, "", err
	}
	defer resp.Body.Close()
	proto = resp.Proto
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return 0, 0, 0, proto, &HTTPStatusError{Code: resp.StatusCode, Body: string(msg)}
	}
	buf := make([]byte, 256<<10)
	for {
		k, rerr := resp.Body.Read(buf)
		w.Progress(k)
		if k > 0 && n == 0 {
			ttfb = time.Since(start)
		}
		n += int64(k)
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return ttfb, time.Since(start), n, proto, rerr
		}
	}
	return ttfb, time.Since(start), n, proto, nil
}

// HTTPStatusError: the server answered with an error status (e.g. 413
// when a bulk size is above its limit).
type HTTPStatusError struct {
	Code int
	Body string
}

func (e *HTTPStatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Code, e.Body) }

// PingResult (000 §II-A "ping"). The first request includes connection
// setup (connect + TLS/QUIC handshake) and is reported apart; Median is
// over the other requests, so it estimates the request RTT.
type PingResult struct {
	Proto        string        `json:"http_proto"`
	Setup        time.Duration `json:"setup_ns"`
	FirstRequest time.Duration `json:"first_request_ns"` // includes Setup
	// Delays of requests 2..N on the same connection: request written to
	// the connection -> first response byte read from it.
	Delays []time.Duration `json:"delays_ns"`
	// AppDelays of the same requests as the application sees them: GET
	// call -> whole body read (adds the HTTP library's scheduling).
	AppDelays []time.Duration `json:"app_delays_ns"`
	Median    time.Duration   `json:"median_ns"`
	AppMedian time.Duration   `json:"app_median_ns"`
	Answered  int             `json:"answered"`
	Sent      int             `json:"sent"`
}

type pingPattern struct{}

func (pingPattern) Name() string   { return "ping" }
func (pingPattern) Family() string { return transport.FamilyHTTP }

func (pingPattern) Register(m *Mux) {
	m.HTTP.HandleFunc("GET /ping/{suffix}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(pingBody)))
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(pingBody)
	})
}

func (pingPattern) Run(ctx context.Context, c *Client) (any, error) {
	p := c.Params
	res := &PingResult{Delays: []time.Duration{}, AppDelays: []time.Duration{}}
	start := time.Now()
	conn, err := c.Dial(ctx, transport.FamilyHTTP)
	if err != nil {
		return res, err
	}
	res.Setup = conn.Info().Setup
	rt := conn.RoundTripper()
	// Requests leave PingGap apart (request i at start + i*gap; one whose
	// slot has passed leaves at once).
	for i := range p.PingCount {
		if wait := time.Until(start.Add(time.Duration(i) * p.PingGap)); i > 0 && wait > 0 {
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(wait):
			}
		}
		res.Sent++
		var ex exchange
		_, total, n, proto, err := getTraced(ctx, rt, "https://"+serverHost(c)+"/ping/"+randomSuffix(), &ex, c.stallTimeout())
		if err != nil {
			return res, fmt.Errorf("ping %d: %w", i+1, err)
		}
		if n != int64(len(pingBody)) {
			return res, fmt.Errorf("ping %d: %w: got %d bytes, want %d", i+1, ErrProtocol, n, len(pingBody))
		}
		res.Proto = proto
		res.Answered++
		if i == 0 {
			res.FirstRequest = time.Since(start)
			continue
		}
		d, ok := ex.delay()
		if !ok {
			d = total
		}
		res.Delays = append(res.Delays, d)
		res.AppDelays = append(res.AppDelays, total)
	}
	res.Median = Median(res.Delays)
	res.AppMedian = Median(res.AppDelays)
	return res, nil
}

// Median of durations (0 for none); the mean of the middle two for an
// even count.
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BulkResult (000 §II-A "bulk"): download of Size bytes on an established
// connection; Completion runs from the request to the last byte.
type BulkResult struct {
	Proto      string        `json:"http_proto"`
	Size       int64         `json:"size"`
	Bytes      int64         `json:"bytes"`
	Setup      time.Duration `json:"setup_ns"`
	TTFB       time.Duration `json:"ttfb_ns"`
	Completion time.Duration `json:"completion_ns"`
	GoodputBps float64       `json:"goodput_bps"`
}

type bulkPattern struct{}

func (bulkPattern) Name() string   { return "bulk" }
func (bulkPattern) Family() string { return transport.FamilyHTTP }

// ErrTooLarge: the request asks for more than the server allows.
var ErrTooLarge = errors.New("request above server limit")

func (bulkPattern) Register(m *Mux) {
	m.HTTP.HandleFunc("GET /bulk/{size}/{suffix}", func(w http.ResponseWriter, r *http.Request) {
		size, err := strconv.ParseInt(r.PathValue("size"), 10, 64)
		if err != nil || size < 0 {
			m.Logger.Info("refused bulk request", "client", r.RemoteAddr, "reason", "bad size", "size", r.PathValue("size"))
			http.Error(w, "bad size", http.StatusBadRequest)
			return
		}
		if size > m.Limits.MaxBulk {
			m.Logger.Info("refused bulk request", "client", r.RemoteAddr, "reason", "size above limit", "size", size, "limit", m.Limits.MaxBulk)
			http.Error(w, fmt.Sprintf("size %d above limit %d", size, m.Limits.MaxBulk), http.StatusRequestEntityTooLarge)
			return
		}
		ServeBulk(w, r, size)
	})
}

// ServeBulk answers r with the bulk object of size bytes as the server's
// bulk pattern does (tests serve it the same way from plain HTTP servers).
// ServeContent answers Range (206 with Content-Range, 416 when
// unsatisfiable), If-Range and the validators, which MPHTTP needs.
func ServeBulk(w http.ResponseWriter, r *http.Request, size int64) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("ETag", BulkETag(size))
	http.ServeContent(bulkWriter{w}, r, "", bulkModTime, NewBulkBody(size))
}

// bulkWriter writes ServeContent's range straight from the bulk pattern,
// in writes of up to 256 KiB, as the handler did before ranges: no copy
// and no 32 KiB pieces.
type bulkWriter struct{ http.ResponseWriter }

func (w bulkWriter) ReadFrom(r io.Reader) (int64, error) {
	if lr, ok := r.(*io.LimitedReader); ok {
		if b, ok := lr.R.(*BulkBody); ok {
			n, err := b.writeTo(w.ResponseWriter, lr.N)
			lr.N -= n
			return n, err
		}
	}
	return io.Copy(struct{ io.Writer }{w.ResponseWriter}, r)
}

func (bulkPattern) Run(ctx context.Context, c *Client) (any, error) {
	p := c.Params
	res := &BulkResult{Size: p.Size}
	conn, err := c.Dial(ctx, transport.FamilyHTTP)
	if err != nil {
		return res, err
	}
	res.Setup = conn.Info().Setup
	ttfb, total, n, proto, err := get(ctx, conn.RoundTripper(), fmt.Sprintf("https://%s/bulk/%d/%s", serverHost(c), p.Size, randomSuffix()), c.stallTimeout())
	res.Proto, res.Bytes, res.TTFB, res.Completion = proto, n, ttfb, total
	if total > 0 {
		res.GoodputBps = float64(n) * 8 / total.Seconds()
	}
	if err != nil {
		var se *HTTPStatusError
		if errors.As(err, &se) && se.Code == http.StatusRequestEntityTooLarge {
			return res, fmt.Errorf("%w: %w", ErrTooLarge, err)
		}
		return res, err
	}
	if n != p.Size {
		return res, fmt.Errorf("%w: got %d bytes, want %d", ErrProtocol, n, p.Size)
	}
	return res, nil
}
