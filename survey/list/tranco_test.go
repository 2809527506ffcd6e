package list

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// trancoStub is a local Tranco service: /top-1m-id, /download/ID/N and
// /api/lists/id/ID, with a fault to inject into the download.
type trancoStub struct {
	*httptest.Server
	mu    sync.Mutex
	id    string
	body  string
	fault string // "", "500", "truncated-length", "truncated-chunked", "html"
	hits  map[string]int
}

func newTrancoStub(t *testing.T, id string, domains int) *trancoStub {
	t.Helper()
	var b strings.Builder
	for i := 1; i <= domains; i++ {
		fmt.Fprintf(&b, "%d,d%d.test\r\n", i, i)
	}
	s := &trancoStub{id: id, body: b.String(), hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	require.True(t, strings.HasPrefix(s.URL, "http://127.0.0.1:"), "loopback only")
	t.Cleanup(s.Close)
	return s
}

func (s *trancoStub) hit(p string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[p]
}

func (s *trancoStub) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.hits[r.URL.Path]++
	fault := s.fault
	s.mu.Unlock()
	switch r.URL.Path {
	case "/top-1m-id":
		fmt.Fprintln(w, s.id)
	case "/api/lists/id/" + s.id:
		fmt.Fprintf(w, `{"list_id": %q, "available": true, "created_on": "2026-11-26T00:00:00.000000"}`, s.id)
	case "/download/" + s.id + "/1000000":
		half := s.body[:len(s.body)/2+3] // ends inside a line
		switch fault {
		case "500":
			http.Error(w, "internal error", http.StatusInternalServerError)
		case "html":
			fmt.Fprint(w, "<html><body>Service temporarily unavailable</body></html>\n")
		case "truncated-length": // says the whole length, sends half
			w.Header().Set("Content-Length", fmt.Sprint(len(s.body)))
			w.WriteHeader(http.StatusOK)
			fmt.Fprint(w, half)
			w.(http.Flusher).Flush()
			hijackClose(w)
		case "truncated-chunked": // no length: the connection just closes
			fmt.Fprint(w, half)
			w.(http.Flusher).Flush()
			hijackClose(w)
		default:
			fmt.Fprint(w, s.body)
		}
	default:
		http.NotFound(w, r)
	}
}

func hijackClose(w http.ResponseWriter) {
	c, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		c.Close()
	}
}

// cacheFiles lists what the cache directory holds.
func cacheFiles(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func TestTrancoFetchLatestCachedForTheDay(t *testing.T) {
	srv := newTrancoStub(t, "K4Z5W", 3)
	dir := t.TempDir()
	day := time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC)
	f := TrancoFetcher{BaseURL: srv.URL, CacheDir: dir, Now: func() time.Time { return day }}
	l, err := f.Fetch(context.Background(), "latest")
	require.NoError(t, err)
	assert.Equal(t, TrancoList{Path: filepath.Join(dir, "tranco-K4Z5W.csv"), ID: "K4Z5W", Date: "2026-11-26", Retrieved: day}, l)
	ds, info, err := LoadList(l.Path, 0)
	require.NoError(t, err)
	assert.Equal(t, []Domain{{1, "d1.test"}, {2, "d2.test"}, {3, "d3.test"}}, ds)
	assert.Equal(t, fmt.Sprintf("%x", sha256Sum(srv.body)), info.SHA256, "cached byte for byte")

	// The same day, no network is needed: the service is gone.
	srv.Close()
	day = day.Add(16 * time.Hour)
	l2, err := f.Fetch(context.Background(), "latest")
	require.NoError(t, err)
	assert.True(t, l2.Cached)
	assert.Equal(t, l.ID, l2.ID)
	assert.Equal(t, "2026-11-26", l2.Date)
	assert.Equal(t, 1, srv.hit("/top-1m-id"))
	assert.Equal(t, 1, srv.hit("/download/K4Z5W/1000000"))
	// An id is immutable: cached for good.
	_, err = f.Fetch(context.Background(), "K4Z5W")
	require.NoError(t, err)

	// The next day "latest" asks again, and the service is unreachable:
	// the error names the URL tried.
	day = day.Add(8 * time.Hour)
	_, err = f.Fetch(context.Background(), "latest")
	require.ErrorIs(t, err, ErrTrancoUnavailable)
	assert.Contains(t, err.Error(), srv.URL+"/top-1m-id")
	assert.NotContains(t, err.Error(), "\n")
}

func sha256Sum(s string) []byte {
	h := sha256.New()
	h.Write([]byte(s))
	return h.Sum(nil)
}

// A download that fails or is not a whole Tranco list is never cached,
// and a later good one is.
func TestTrancoFetchFaultsAreNeverCached(t *testing.T) {
	for _, tc := range []struct{ fault, want string }{
		{"500", "HTTP 500"},
		{"html", "not a Tranco list"},
		{"truncated-length", "/download/K4Z5W/1000000"},
		{"truncated-chunked", "/download/K4Z5W/1000000"},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			srv := newTrancoStub(t, "K4Z5W", 5000)
			srv.fault = tc.fault
			dir := t.TempDir()
			f := TrancoFetcher{BaseURL: srv.URL, CacheDir: dir}
			_, err := f.Fetch(context.Background(), "latest")
			require.ErrorIs(t, err, ErrTrancoUnavailable)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), srv.URL)
			assert.Empty(t, cacheFiles(t, dir), "nothing cached, no temporary file left")

			srv.mu.Lock()
			srv.fault = ""
			srv.mu.Unlock()
			l, err := f.Fetch(context.Background(), "latest")
			require.NoError(t, err)
			assert.False(t, l.Cached)
			ds, _, err := LoadList(l.Path, 0)
			require.NoError(t, err)
			assert.Len(t, ds, 5000)
		})
	}
}

func TestTrancoFetchTruncatedIsTruncated(t *testing.T) {
	// What the check sees of a body cut inside a line, and of one with a
	// rank missing (a proxy dropping a chunk).
	c := &trancoCSV{w: discard{}}
	_, err := c.Write([]byte("1,a.test\n2,b.te"))
	require.NoError(t, err)
	assert.ErrorContains(t, c.Close(), "truncated: line 2 has no end")
	c = &trancoCSV{w: discard{}}
	_, err = c.Write([]byte("1,a.test\n3,c.test\n"))
	assert.ErrorContains(t, err, `line 2 is "3,c.test"`)
	c = &trancoCSV{w: discard{}}
	assert.ErrorContains(t, c.Close(), "empty")
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func TestTrancoFetchNoNetwork(t *testing.T) {
	// A port nothing listens on: connection refused, as offline.
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	base := "http://" + ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	f := TrancoFetcher{BaseURL: base, CacheDir: dir}
	_, err = f.Fetch(context.Background(), "latest")
	require.ErrorIs(t, err, ErrTrancoUnavailable)
	assert.Contains(t, err.Error(), base+"/top-1m-id")
	_, err = f.Fetch(context.Background(), "K4Z5W")
	require.ErrorIs(t, err, ErrTrancoUnavailable)
	assert.Contains(t, err.Error(), base+"/download/K4Z5W/1000000")
	assert.Empty(t, cacheFiles(t, dir))
}

func TestTrancoFetchBadIDs(t *testing.T) {
	srv := newTrancoStub(t, "K4Z5W", 3)
	dir := t.TempDir()
	f := TrancoFetcher{BaseURL: srv.URL, CacheDir: dir}
	_, err := f.Fetch(context.Background(), "../../etc")
	assert.ErrorContains(t, err, "invalid Tranco list id")
	assert.NotErrorIs(t, err, ErrTrancoUnavailable)
	_, err = f.Fetch(context.Background(), "NOPE1")
	require.ErrorIs(t, err, ErrTrancoUnavailable)
	assert.ErrorContains(t, err, "404")
	srv.id = "not an id"
	_, err = f.Fetch(context.Background(), "latest")
	assert.ErrorContains(t, err, "not a list id")
	assert.Empty(t, cacheFiles(t, dir))
}

// Without a date from the service (a mirror of the CSV files only), the
// list is still cached, its date unknown.
func TestTrancoFetchMirrorWithoutMetadata(t *testing.T) {
	body := "1,a.test\n2,b.test\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/download/AB12/1000000" {
			bw := bufio.NewWriter(w)
			bw.WriteString(body)
			bw.Flush()
			return
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	f := TrancoFetcher{BaseURL: srv.URL + "/", CacheDir: t.TempDir()}
	l, err := f.Fetch(context.Background(), "AB12")
	require.NoError(t, err)
	assert.Empty(t, l.Date)
	l, err = f.Fetch(context.Background(), "AB12")
	require.NoError(t, err)
	assert.True(t, l.Cached)
}

func TestDefaultCacheDirUnderSystemd(t *testing.T) {
	t.Setenv("CACHE_DIRECTORY", "/var/cache/mptester:/var/cache/other")
	assert.Equal(t, "/var/cache/mptester/tranco", DefaultCacheDir())
	t.Setenv("CACHE_DIRECTORY", "")
	assert.NotEqual(t, "/var/cache/mptester/tranco", DefaultCacheDir())
}

// FuzzTrancoCSV: the download check never panics, says the same however
// the body is split into writes, and what it accepts is read by
// ParseList line for line.
func FuzzTrancoCSV(f *testing.F) {
	f.Add([]byte("1,a.test\r\n2,b.test\r\n"), 3)
	f.Add([]byte("1,a.test\n2,b.te"), 1)
	f.Add([]byte("\ufeff1,a.test\n"), 2)
	f.Add([]byte("<html>\n"), 0)
	f.Add([]byte("1,a.test\n3,c.test\n"), 5)
	f.Add([]byte(""), 0)
	f.Fuzz(func(t *testing.T, body []byte, split int) {
		check := func(chunks ...[]byte) (int, error) {
			c := &trancoCSV{w: discard{}}
			for _, b := range chunks {
				if _, err := c.Write(b); err != nil {
					return c.lines, err
				}
			}
			return c.lines, c.Close()
		}
		n1, err1 := check(body)
		at := 0
		if len(body) > 0 {
			at = ((split % len(body)) + len(body)) % len(body)
		}
		n2, err2 := check(body[:at], body[at:])
		if (err1 == nil) != (err2 == nil) || (err1 == nil && n1 != n2) {
			t.Fatalf("split at %d: %d, %v against %d, %v", at, n2, err2, n1, err1)
		}
		if err1 != nil {
			return
		}
		_, info, err := ParseList(bytes.NewReader(body), 0)
		if err != nil || info.Lines != n1 {
			t.Fatalf("accepted %d lines, ParseList read %d (%v)", n1, info.Lines, err)
		}
	})
}
