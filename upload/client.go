package upload

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/mptester/mptester/collect/api"
	"github.com/mptester/mptester/internal/certs"
)

// Compression of upload bodies.
const (
	CompressZstd = "zstd"
	CompressGzip = "gzip"
	CompressNone = "none"
)

// Backoff between retries of one result: exponential from Base to Max,
// full jitter, at most Attempts tries per drain; a server's Retry-After
// is honoured when longer.
type Backoff struct {
	Base     time.Duration
	Max      time.Duration
	Attempts int
}

// DefaultBackoff suits a cron probe: a few tries, then the next run.
func DefaultBackoff() Backoff { return Backoff{Base: time.Second, Max: 60 * time.Second, Attempts: 5} }

// Client uploads spooled results to one collect server.
type Client struct {
	URL         string // https://host:port
	Token       string
	Compression string
	Path        string // interface the uploads are bound to ("" any), told to the server
	Backoff     Backoff
	Logger      *slog.Logger
	HTTP        *http.Client
	// sleep waits (tests shorten it).
	sleep func(context.Context, time.Duration) error
}

// Transport builds the HTTP transport: TLS pinned to a certificate
// fingerprint when pin is set (a self-signed collector), connections made
// by dial when set (bound to a preferred path).
func Transport(pin *[32]byte, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if dial != nil {
		t.DialContext = dial
	}
	if pin != nil {
		t.TLSClientConfig = certs.Pinned("", *pin)
	} else {
		t.TLSClientConfig = &tls.Config{MinVersion: certs.MinVersion}
	}
	t.ResponseHeaderTimeout = 2 * time.Minute
	return t
}

// Outcome of one upload attempt.
type Outcome int

const (
	Uploaded  Outcome = iota // 2xx with a matching receipt: deleted
	Rejected                 // a final 4xx: moved to rejected/
	Retryable                // network error, 5xx, 408, 429, or a receipt that does not match
	Refused                  // 401: the token is wrong or revoked; stop for now
	Mismatch                 // the collector's certificate is not the pinned one; stop
)

// Misdirected: the collector answered a redirect (or the request was for
// another origin); never followed, not retried; stop.
const Misdirected = Mismatch + 1

// Result of a drain.
type Result struct {
	Uploaded   int   `json:"uploaded"`
	Duplicates int   `json:"duplicates"`
	Rejected   int   `json:"rejected"`
	Pending    int   `json:"pending"`
	Dropped    int64 `json:"dropped_unreported"`
}

// ErrNotDrained: results are still pending after a drain (server down,
// token refused, deadline); they stay in the spool for the next run.
var ErrNotDrained = errors.New("results still pending")

// Drain uploads every pending result, oldest first, and returns what
// happened. It holds the spool lock; ErrLocked if another upload does.
//
// No result waits behind another: a refused one (4xx) is moved aside at
// once, one the collector failed to store (500, 408, a receipt that does
// not match) is retried after the others. When the collector as a whole
// is unreachable or asks for a pause (network error, 429, 502-504, 507),
// the drain backs off and resumes where it was.
func (c *Client) Drain(ctx context.Context, s *Spool) (Result, error) {
	unlock, err := s.Lock()
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	queue, err := s.sendable()
	if err != nil {
		return Result{}, err
	}
	var res Result
	var stop error
	for attempt := 1; len(queue) > 0 && stop == nil; attempt++ {
		var later []Item // failed on their own: after the others
		var last error
		var wait time.Duration
		for i, it := range queue {
			o, rc, w, err := c.send(ctx, s, it, len(queue)-i-1+len(later))
			switch o {
			case Uploaded:
				res.Uploaded++
				if rc.Duplicate {
					res.Duplicates++
				}
				continue
			case Rejected:
				res.Rejected++
				continue
			case Refused, Mismatch, Misdirected:
				stop = err
			default:
				last, wait = err, max(wait, w)
				if !collectorWide(err) {
					later = append(later, it)
					continue
				}
				later = append(slices.Clone(queue[i:]), later...)
			}
			break
		}
		if stop != nil || len(later) == 0 {
			break
		}
		if attempt >= max(c.Backoff.Attempts, 1) || ctx.Err() != nil {
			stop = last
			break
		}
		d := c.backoff(attempt, wait)
		c.log().Warn("upload failed; retrying", "run_id", later[0].RunID, "results", len(later), "attempt", attempt, "in", d.Round(time.Millisecond), "err", last)
		if err := c.wait(ctx, d); err != nil {
			stop = err
			break
		}
		queue = later
	}
	left, err := s.sendable()
	if err != nil {
		return res, err
	}
	res.Pending, res.Dropped = len(left), s.Dropped()
	if res.Pending > 0 {
		if stop == nil {
			stop = errors.New("new results arrived during the drain")
		}
		return res, fmt.Errorf("%w: %d (%w)", ErrNotDrained, res.Pending, stop)
	}
	return res, nil
}

// answerError is a collector's answer that is not a receipt.
type answerError struct {
	code int
	text string
}

func (e *answerError) Error() string { return fmt.Sprintf("collector answered %d: %s", e.code, e.text) }

// collectorWide says whether err concerns the collector as a whole (so
// the next result would fare no better) rather than the result sent.
func collectorWide(err error) bool {
	var ae *answerError
	if !errors.As(err, &ae) {
		var re *receiptError
		return !errors.As(err, &re) // no answer at all: unreachable
	}
	switch ae.code {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout, http.StatusInsufficientStorage:
		return true
	}
	return false
}

// receiptError is a 2xx that does not acknowledge the file sent.
type receiptError struct{ err error }

func (e *receiptError) Error() string { return e.err.Error() }
func (e *receiptError) Unwrap() error { return e.err }

// backoff is full jitter over an exponential cap, but at least what the
// server asked for.
func (c *Client) backoff(attempt int, retryAfter time.Duration) time.Duration {
	b := c.Backoff
	if b.Base <= 0 {
		b.Base = time.Second
	}
	if b.Max < b.Base {
		b.Max = b.Base
	}
	ceil := b.Base << min(attempt-1, 30)
	if ceil > b.Max || ceil <= 0 {
		ceil = b.Max
	}
	d := time.Duration(rand.Int64N(int64(ceil)) + 1)
	return max(d, retryAfter)
}

func (c *Client) wait(ctx context.Context, d time.Duration) error {
	if c.sleep != nil {
		return c.sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (c *Client) log() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

// send uploads one item once and applies the outcome to the spool.
func (c *Client) send(ctx context.Context, s *Spool, it Item, backlog int) (Outcome, api.Receipt, time.Duration, error) {
	f, err := s.Open(it)
	if err != nil {
		return Retryable, api.Receipt{}, 0, err
	}
	defer f.Close()
	h := sha256.New()
	src := io.TeeReader(f, h)
	body, enc := compress(src, c.Compression)
	dropped := s.Dropped()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, strings.TrimRight(c.URL, "/")+api.RunsPath+it.RunID, body)
	if err != nil {
		body.Close()
		return Refused, api.Receipt{}, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if enc != "" {
		req.Header.Set("Content-Encoding", enc)
	}
	req.Header.Set(api.HeaderBacklog, strconv.Itoa(backlog))
	req.Header.Set(api.HeaderDropped, strconv.FormatInt(dropped, 10))
	if c.Path != "" {
		req.Header.Set(api.HeaderPath, c.Path)
	}
	resp, err := Guard(c.HTTP, c.URL).Do(req)
	if IsMisdirected(err) {
		return Misdirected, api.Receipt{}, 0, err
	}
	if errors.Is(err, certs.ErrPinMismatch) {
		// A collector with a new identity, or not ours: retrying cannot
		// help, re-pinning (upload: pin:) can.
		return Mismatch, api.Receipt{}, 0, err
	}
	if err != nil {
		return Retryable, api.Receipt{}, 0, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Retryable, api.Receipt{}, 0, err
	}
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		var rc api.Receipt
		if err := json.Unmarshal(answer, &rc); err != nil {
			return Retryable, rc, 0, &receiptError{fmt.Errorf("receipt for %s: %w", it.RunID, err)}
		}
		sum := hex.EncodeToString(h.Sum(nil))
		if rc.SHA256 != sum || rc.RunID != it.RunID {
			// Kept: what the server holds is not what we have.
			return Retryable, rc, 0, &receiptError{fmt.Errorf("receipt for %s names sha256 %s, the file has %s", it.RunID, rc.SHA256, sum)}
		}
		if dropped > 0 {
			// Reported: subtracted before anything else can fail, so the
			// same drops are never reported twice.
			if err := s.reportedDropped(dropped); err != nil {
				c.log().Warn("dropped-results counter not rewritten; kept in memory", "err", err)
			}
		}
		if err := s.Done(it); err != nil {
			return Retryable, rc, 0, &receiptError{err}
		}
		c.log().Info("uploaded", "run_id", it.RunID, "status", code, "duplicate", rc.Duplicate, "bytes", rc.Bytes)
		return Uploaded, rc, 0, nil
	case code == http.StatusUnauthorized:
		return Refused, api.Receipt{}, 0, fmt.Errorf("collector refused the token (401): %s", CollectorText(answer, 512))
	case code == http.StatusRequestTimeout, code == http.StatusTooManyRequests, code >= 500:
		return Retryable, api.Receipt{}, retryAfter(resp.Header.Get("Retry-After")), &answerError{code, CollectorText(answer, 512)}
	case code >= 400:
		if err := s.Reject(it, fmt.Appendf(nil, `{"status":%d,"answer":%s}`, code, jsonOrString(answer))); err != nil {
			// Marked in memory instead: never sent again by this process,
			// never in the way of the results behind it.
			c.log().Error("upload rejected; could not be moved to rejected/, skipped until the next start", "run_id", it.RunID,
				"status", code, "answer", CollectorText(answer, 512), "err", err)
			return Rejected, api.Receipt{}, 0, nil
		}
		c.log().Error("upload rejected; kept in rejected/", "run_id", it.RunID, "status", code, "answer", CollectorText(answer, 512))
		return Rejected, api.Receipt{}, 0, nil
	}
	return Retryable, api.Receipt{}, 0, &answerError{code, CollectorText(answer, 512)}
}

func jsonOrString(b []byte) []byte {
	if json.Valid(b) {
		return b
	}
	q, _ := json.Marshal(string(b))
	return q
}

// retryAfter parses Retry-After (seconds or an HTTP date).
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// compress streams r through the encoder (zstd unless gzip or none) in a
// goroutine and returns the body with its Content-Encoding.
func compress(r io.Reader, kind string) (io.ReadCloser, string) {
	if kind == CompressNone {
		return io.NopCloser(r), ""
	}
	if kind != CompressGzip {
		kind = CompressZstd
	}
	pr, pw := io.Pipe()
	go func() {
		var w io.WriteCloser = gzip.NewWriter(pw)
		if kind == CompressZstd {
			zw, err := zstd.NewWriter(pw, zstd.WithEncoderConcurrency(1))
			if err != nil {
				pw.CloseWithError(err)
				return
			}
			w = zw
		}
		_, err := io.Copy(w, r)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		pw.CloseWithError(err)
	}()
	return pr, kind
}
