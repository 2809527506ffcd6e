package upload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/collect/store"
)

func result(t testing.TB, id, probe string) []byte {
	b, err := os.ReadFile(filepath.Join("..", "report", "testdata", "stream.jsonl"))
	require.NoError(t, err)
	s := strings.ReplaceAll(string(b), "0f8c3f6e-3c1a-4c36-9a55-1f2d1c5e7a10", id)
	return []byte(strings.ReplaceAll(s, "m-0123456789abcdef", probe))
}

func spoolResult(t testing.TB, s *Spool, body []byte, id string) {
	e, err := s.Create(id, ".jsonl")
	require.NoError(t, err)
	_, err = e.Write(body)
	require.NoError(t, err)
	require.NoError(t, e.Commit())
}

type server struct {
	st    store.Store
	h     http.Handler
	url   string
	tok   string
	admin string
}

// newServer is a real collect server (SQLite) on loopback; wrap, when set,
// sits in front of it to inject faults.
func newServer(t *testing.T, wrap func(http.Handler) http.Handler) *server {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "c.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	sv := &server{st: st, tok: collect.NewToken(), admin: collect.NewToken()}
	require.NoError(t, st.AddProbe(ctx, "pi1", collect.HashToken(sv.tok), time.Now()))
	require.NoError(t, st.AddAdmin(ctx, "ops", collect.HashToken(sv.admin), time.Now()))
	srv, err := collect.New(collect.Config{Store: st, Data: filepath.Join(dir, "data"), Limits: collect.DefaultLimits()})
	require.NoError(t, err)
	sv.h = srv.Handler()
	h := sv.h
	if wrap != nil {
		h = wrap(h)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	sv.url = ts.URL
	return sv
}

func (sv *server) raw(t *testing.T, id string) []byte {
	req := httptest.NewRequest(http.MethodGet, "/v1/runs/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+sv.admin)
	rec := httptest.NewRecorder()
	sv.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return nil
	}
	return rec.Body.Bytes()
}

type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func client(sv *server, sl *sleeps, comp string) *Client {
	c := &Client{URL: sv.url, Token: sv.tok, Compression: comp, Backoff: Backoff{Base: time.Second, Max: 8 * time.Second, Attempts: 4}}
	if sl != nil {
		c.sleep = sl.sleep
	}
	return c
}

func TestDrainUploadsByteIdentical(t *testing.T) {
	for _, comp := range []string{CompressZstd, CompressGzip, CompressNone} {
		t.Run(comp, func(t *testing.T) {
			sv := newServer(t, nil)
			sp, err := OpenSpool(t.TempDir(), Quota{})
			require.NoError(t, err)
			bodies := map[string][]byte{}
			for i := 0; i < 5; i++ {
				id := uuid.NewString()
				bodies[id] = result(t, id, "pi1")
				spoolResult(t, sp, bodies[id], id)
			}
			res, err := client(sv, nil, comp).Drain(context.Background(), sp)
			require.NoError(t, err)
			assert.Equal(t, Result{Uploaded: 5}, res)
			for id, b := range bodies {
				assert.Equal(t, b, sv.raw(t, id))
			}
			left, _ := sp.Pending()
			assert.Empty(t, left)
			res, err = client(sv, nil, comp).Drain(context.Background(), sp)
			require.NoError(t, err)
			assert.Equal(t, Result{}, res, "nothing left to send")
		})
	}
}

func TestRejectedKeepsAnswer(t *testing.T) {
	sv := newServer(t, nil)
	sp, err := OpenSpool(t.TempDir(), Quota{})
	require.NoError(t, err)
	good, bad, other := uuid.NewString(), uuid.NewString(), uuid.NewString()
	spoolResult(t, sp, result(t, bad, "pi1")[:200], bad) // truncated: 400
	spoolResult(t, sp, result(t, other, "pi2"), other)   // another probe's: 403
	spoolResult(t, sp, result(t, good, "pi1"), good)
	res, err := client(sv, nil, CompressZstd).Drain(context.Background(), sp)
	require.NoError(t, err)
	assert.Equal(t, Result{Uploaded: 1, Rejected: 2}, res)
	rej, err := sp.Rejected()
	require.NoError(t, err)
	require.Len(t, rej, 2)
	answers := rej[0].Answer + rej[1].Answer
	assert.Contains(t, answers, `"status":400`)
	assert.Contains(t, answers, `"status":403`)
	assert.Contains(t, answers, "/probe_id")
}

// TestRetryHonoursRetryAfter: 429 and 503 are retried with backoff no
// shorter than Retry-After; the result is deleted only after the 2xx.
func TestRetryHonoursRetryAfter(t *testing.T) {
	var m atomic.Int32
	sv2 := newServer(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch m.Add(1) {
			case 1:
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Retry-After", "7")
				w.WriteHeader(http.StatusTooManyRequests)
			case 2:
				io.Copy(io.Discard, r.Body)
				w.WriteHeader(http.StatusServiceUnavailable)
			case 3:
				io.Copy(io.Discard, r.Body)
				w.WriteHeader(http.StatusRequestTimeout)
			default:
				h.ServeHTTP(w, r)
			}
		})
	})
	sp, err := OpenSpool(t.TempDir(), Quota{})
	require.NoError(t, err)
	id := uuid.NewString()
	body := result(t, id, "pi1")
	spoolResult(t, sp, body, id)
	sl := &sleeps{}
	res, err := client(sv2, sl, CompressZstd).Drain(context.Background(), sp)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Uploaded)
	require.Len(t, sl.d, 3)
	assert.GreaterOrEqual(t, sl.d[0], 7*time.Second, "Retry-After honoured")
	assert.LessOrEqual(t, sl.d[1], 2*time.Second, "exponential: attempt 2 within 2 s")
	assert.LessOrEqual(t, sl.d[2], 4*time.Second)
	assert.Equal(t, body, sv2.raw(t, id))
}

func TestServerDownKeepsEverything(t *testing.T) {
	sv := newServer(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusInternalServerError)
		})
	})
	sp, err := OpenSpool(t.TempDir(), Quota{})
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		id := uuid.NewString()
		spoolResult(t, sp, result(t, id, "pi1"), id)
	}
	sl := &sleeps{}
	res, err := client(sv, sl, CompressZstd).Drain(context.Background(), sp)
	require.ErrorIs(t, err, ErrNotDrained)
	assert.Equal(t, 3, res.Pending)
	assert.Len(t, sl.d, 3, "4 attempts on the first result, then the drain stops")

	// A closed port: connection refused is retried the same way.
	c := client(sv, sl, CompressZstd)
	c.URL = "http://127.0.0.1:1"
	_, err = c.Drain(context.Background(), sp)
	require.ErrorIs(t, err, ErrNotDrained)
	left, _ := sp.Pending()
	assert.Len(t, left, 3)
}

func TestUnauthorizedStops(t *testing.T) {
	sv := newServer(t, nil)
	sp, err := OpenSpool(t.TempDir(), Quota{})
	require.NoError(t, err)
	for i := 0; i < 2; i++ {
		id := uuid.NewString()
		spoolResult(t, sp, result(t, id, "pi1"), id)
	}
	sl := &sleeps{}
	c := client(sv, sl, CompressZstd)
	c.Token = collect.NewToken()
	res, err := c.Drain(context.Background(), sp)
	require.ErrorIs(t, err, ErrNotDrained)
	assert.Contains(t, err.Error(), "401")
	assert.Equal(t, 2, res.Pending)
	assert.Empty(t, sl.d, "401 is not retried in a loop")
	rej, _ := sp.Rejected()
	assert.Empty(t, rej, "401 does not reject the result")
}

// TestReceiptMismatchKeepsFile: a 2xx whose sha256 is not the file's
// (fault injected) never deletes it.
func TestReceiptMismatchKeepsFile(t *testing.T) {
	sv := newServer(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			w.WriteHeader(rec.Code)
			w.Write(bytes.Replace(rec.Body.Bytes(), []byte(`"sha256":"`), []byte(`"sha256":"00`), 1))
		})
	})
	sp, err := OpenSpool(t.TempDir(), Quota{})
	require.NoError(t, err)
	id := uuid.NewString()
	spoolResult(t, sp, result(t, id, "pi1"), id)
	_, err = client(sv, &sleeps{}, CompressZstd).Drain(context.Background(), sp)
	require.ErrorIs(t, err, ErrNotDrained)
	left, _ := sp.Pending()
	assert.Len(t, left, 1)
}

func TestLockKeepsSecondUploaderOut(t *testing.T) {
	sp, err := OpenSpool(t.TempDir(), Quota{})
	require.NoError(t, err)
	unlock, err := sp.Lock()
	require.NoError(t, err)
	sp2, _ := OpenSpool(sp.Dir(), Quota{})
	_, err = (&Client{URL: "http://127.0.0.1:1"}).Drain(context.Background(), sp2)
	assert.ErrorIs(t, err, ErrLocked)
	unlock()
	_, err = (&Client{URL: "http://127.0.0.1:1"}).Drain(context.Background(), sp2)
	assert.NoError(t, err, "an empty spool drains")
}

// TestQuotaDropsOldestAndReports: over the byte quota the oldest results
// go, the count is sent with the next upload and then reset.
func TestQuotaDropsOldestAndReports(t *testing.T) {
	sv := newServer(t, nil)
	one := int64(len(result(t, uuid.NewString(), "pi1")))
	sp, err := OpenSpool(t.TempDir(), Quota{MaxBytes: 3*one + one/2})
	require.NoError(t, err)
	var ids []string
	base := time.Now().Add(-time.Hour)
	for i := 0; i < 6; i++ {
		id := uuid.NewString()
		ids = append(ids, id)
		spoolResult(t, sp, result(t, id, "pi1"), id)
		// Distinct, increasing spool times regardless of the clock's grain.
		require.NoError(t, os.Chtimes(filepath.Join(sp.Dir(), "new", id+".jsonl"), base, base.Add(time.Duration(i)*time.Minute)))
	}
	left, _ := sp.Pending()
	require.Len(t, left, 3)
	for i, it := range left {
		assert.Equal(t, ids[3+i], it.RunID, "the newest are kept")
	}
	assert.Equal(t, int64(3), sp.Dropped())

	sp.quota = Quota{MaxAge: 30 * time.Minute}
	now := time.Now()
	for _, id := range ids[4:] {
		require.NoError(t, os.Chtimes(filepath.Join(sp.Dir(), "new", id+".jsonl"), now, now))
	}
	n, err := sp.enforceQuota()
	require.NoError(t, err)
	assert.Equal(t, 1, n, "older than MaxAge")
	assert.Equal(t, int64(4), sp.Dropped())

	_, err = client(sv, nil, CompressZstd).Drain(context.Background(), sp)
	require.NoError(t, err)
	assert.Equal(t, int64(0), sp.Dropped(), "reported with the receipt")
	ps, err := sv.st.ListProbes(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(4), ps[0].Dropped)
}

func TestBackoffJitterBounds(t *testing.T) {
	c := &Client{Backoff: Backoff{Base: 100 * time.Millisecond, Max: time.Second}}
	for attempt := 1; attempt <= 8; attempt++ {
		ceil := min(100*time.Millisecond<<(attempt-1), time.Second)
		seen := map[time.Duration]bool{}
		for i := 0; i < 50; i++ {
			d := c.backoff(attempt, 0)
			assert.Greater(t, d, time.Duration(0))
			assert.LessOrEqual(t, d, ceil, fmt.Sprint(attempt))
			seen[d] = true
		}
		assert.Greater(t, len(seen), 10, "jittered")
	}
	assert.Equal(t, 30*time.Second, c.backoff(1, 30*time.Second))
	assert.Equal(t, 5*time.Second, retryAfter("5"))
	assert.Equal(t, time.Duration(0), retryAfter("soon"))
	assert.False(t, errors.Is(nil, ErrLocked))
}
