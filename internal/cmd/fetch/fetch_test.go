package fetch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/mphttp"
	"github.com/mptester/mptester/patterns"
	"github.com/mptester/mptester/probe"
)

func loopback(t *testing.T) []probe.Path {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("loopback path binding is tested on Linux")
	}
	all, err := probe.Discover(context.Background(), probe.DiscoverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range all {
		if p.Kind == probe.KindLoopback {
			return []probe.Path{p}
		}
	}
	t.Fatal("no loopback path")
	return nil
}

// bulkServer serves the bulk pattern's object (ranges, ETag) as serve does.
func bulkServer(t *testing.T, tls bool, die bool) *httptest.Server {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		size, _ := strconv.ParseInt(r.PathValue("size"), 10, 64)
		if die {
			w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
			_, _ = io.CopyN(w, patterns.NewBulkBody(size), size/2)
			panic(http.ErrAbortHandler)
		}
		w.Header().Set("ETag", patterns.BulkETag(size))
		http.ServeContent(w, r, "", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), patterns.NewBulkBody(size))
	})
	mux := http.NewServeMux()
	mux.Handle("GET /bulk/{size}/{suffix}", h)
	s := httptest.NewUnstartedServer(mux)
	if tls {
		s.EnableHTTP2 = true
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

func want(t *testing.T, size int64) []byte {
	b, err := io.ReadAll(patterns.NewBulkBody(size))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newOpts(t *testing.T, url string, paths []probe.Path) (*Options, *bytes.Buffer, *bytes.Buffer) {
	io, out, errOut := cmdutil.Test()
	return &Options{IO: io, URL: url, Family: "any", Tolerance: mphttp.DefaultTolerance, MemoryCap: mphttp.DefaultMemoryCap,
		StallTimeout: patterns.DefaultStallTimeout, Output: "-", Paths: []string{paths[0].Name}, Discover: func(context.Context) ([]probe.Path, error) { return paths, nil }}, out, errOut
}

// The object written by fetch over a bound path is byte-identical to the
// server's, over HTTP/1.1 and over HTTP/2 with TLS; --json says how.
func TestFetchOverLoopback(t *testing.T) {
	lo := loopback(t)
	const size = 3<<20 + 5
	for _, tls := range []bool{false, true} {
		srv := bulkServer(t, tls, false)
		file := filepath.Join(t.TempDir(), "obj")
		opts, out, _ := newOpts(t, srv.URL+"/bulk/"+strconv.Itoa(size)+"/x", lo)
		opts.Output, opts.JSON, opts.Insecure = file, true, true
		if err := fetchRun(context.Background(), opts); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want(t, size)) {
			t.Fatalf("tls %v: output differs from the object (%d bytes)", tls, len(got))
		}
		var res struct {
			Bytes       int64 `json:"bytes"`
			Consistency string
			Paths       []struct {
				Name  string
				Bytes int64
			}
			Resolution []patterns.ServerResolution
		}
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if res.Bytes != size || len(res.Paths) != 1 || res.Paths[0].Name != lo[0].Name || res.Paths[0].Bytes != size || len(res.Resolution) != 1 {
			t.Fatalf("result %s", out)
		}
	}
	// Without --json the object goes to stdout; a terminal on stderr gets
	// a progress line (cleared at the end) before the summary.
	srv := bulkServer(t, false, false)
	opts, out, errOut := newOpts(t, srv.URL+"/bulk/1000/x", lo)
	opts.IO.SetTTY(false, true)
	if err := fetchRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want(t, 1000)) || !strings.HasPrefix(errOut.String(), "\r\033[K") || !strings.Contains(errOut.String(), "fetched 1000 bytes") {
		t.Fatalf("stdout %d bytes, stderr %q", out.Len(), errOut)
	}
	// Not a terminal: no progress.
	opts, _, errOut = newOpts(t, srv.URL+"/bulk/1000/x", lo)
	if err := fetchRun(context.Background(), opts); err != nil || strings.Contains(errOut.String(), "\r") {
		t.Fatalf("%v, stderr %q", err, errOut)
	}
}

// A download that fails leaves no file behind under the requested name.
func TestFetchFailureRemovesOutput(t *testing.T) {
	lo := loopback(t)
	srv := bulkServer(t, false, true)
	file := filepath.Join(t.TempDir(), "obj")
	opts, _, _ := newOpts(t, srv.URL+"/bulk/2000000/x", lo)
	opts.Output = file
	err := fetchRun(context.Background(), opts)
	if !errors.Is(err, mphttp.ErrPathsFailed) {
		t.Fatalf("err %v, want ErrPathsFailed", err)
	}
	if _, serr := os.Stat(file); !errors.Is(serr, os.ErrNotExist) {
		t.Fatalf("partial output left behind: %v", serr)
	}
}

// Bad input: exit 2 naming the problem, before any file is created.
func TestFetchBadInput(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "obj")
	three := []probe.Path{{Name: "a", Up: true, DefaultRoute: true}, {Name: "b", Up: true, DefaultRoute: true}, {Name: "c", Up: true, DefaultRoute: true}}
	for _, tc := range []struct {
		name string
		mod  func(*Options)
	}{
		{"scheme", func(o *Options) { o.URL = "ftp://x/y" }},
		{"no host", func(o *Options) { o.URL = "http:///y" }},
		{"port", func(o *Options) { o.URL = "http://x:0/y" }},
		{"tolerance", func(o *Options) { o.Tolerance = -time.Second }},
		{"memory cap", func(o *Options) { o.MemoryCap = 0 }},
		{"stall timeout", func(o *Options) { o.StallTimeout = -time.Second }},
		{"timeout", func(o *Options) { o.Timeout = -time.Second }},
		{"family", func(o *Options) { o.Family = "5" }},
		{"json to stdout", func(o *Options) { o.Output, o.JSON = "-", true }},
		{"output dir", func(o *Options) { o.Output = filepath.Join(dir, "missing", "obj") }},
		{"three paths", func(o *Options) { o.Paths = []string{"a", "b", "c"} }},
		{"unknown path", func(o *Options) { o.Paths = []string{"zz"} }},
		{"default three", func(o *Options) { o.Paths = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts, _, _ := newOpts(t, "http://127.0.0.1:1/x", three)
			opts.Output = file
			tc.mod(opts)
			err := fetchRun(context.Background(), opts)
			if cmdutil.ExitCode(err) != cmdutil.ExitUsage {
				t.Fatalf("err %v: exit %d, want 2", err, cmdutil.ExitCode(err))
			}
			if _, serr := os.Stat(file); !errors.Is(serr, os.ErrNotExist) {
				t.Fatal("output created")
			}
		})
	}
}

// stallServer answers GET /stall with a Content-Length of 4 MiB and 1,000
// bytes, then sends nothing until the client goes; GET /trickle/{n} with a
// chunked body of n bytes, one every 100 ms.
func stallServer(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stall", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "4194304")
		_, _ = w.Write(make([]byte, 1000))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	mux.HandleFunc("GET /trickle/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		for range n {
			if _, err := w.Write([]byte{'x'}); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-time.After(100 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// A body that stops after 1,000 of its 4 MiB ends the fetch once nothing
// arrived for --stall-timeout, with an error naming the URL, the path and
// the byte reached, exit 1, and no output left.
func TestFetchStalledBody(t *testing.T) {
	lo := loopback(t)
	srv := stallServer(t)
	file := filepath.Join(t.TempDir(), "obj")
	opts, _, _ := newOpts(t, srv.URL+"/stall", lo)
	opts.Output, opts.StallTimeout = file, 500*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := fetchRun(ctx, opts)
	var se *patterns.StallError
	if !errors.As(err, &se) || !errors.Is(err, patterns.ErrStalled) {
		t.Fatalf("err %v, want a stall", err)
	}
	if ctx.Err() != nil {
		t.Fatal("ended by the test's own timeout, not the stall timeout")
	}
	msg := err.Error()
	for _, want := range []string{srv.URL + "/stall", lo[0].Name, "stalled at byte 1000", "500ms"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if cmdutil.ExitCode(err) != 1 {
		t.Errorf("exit %d, want 1", cmdutil.ExitCode(err))
	}
	if _, serr := os.Stat(file); !errors.Is(serr, os.ErrNotExist) {
		t.Fatalf("partial output left behind: %v", serr)
	}
}

// A chunked body of a byte every 100 ms is progress: under a 500 ms stall
// timeout it completes; --timeout ends it when it runs longer, naming the
// byte reached, with no output left.
func TestFetchTrickle(t *testing.T) {
	lo := loopback(t)
	srv := stallServer(t)
	opts, out, _ := newOpts(t, srv.URL+"/trickle/12", lo)
	opts.StallTimeout = 500 * time.Millisecond
	if err := fetchRun(context.Background(), opts); err != nil || out.String() != strings.Repeat("x", 12) {
		t.Fatalf("trickle of 12 bytes: %v, got %q", err, out)
	}
	file := filepath.Join(t.TempDir(), "obj")
	opts, _, _ = newOpts(t, srv.URL+"/trickle/1000", lo)
	opts.Output, opts.StallTimeout, opts.Timeout = file, 500*time.Millisecond, 800*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := fetchRun(ctx, opts)
	if !errors.Is(err, errTimeout) || errors.Is(err, patterns.ErrStalled) || ctx.Err() != nil {
		t.Fatalf("err %v, want --timeout", err)
	}
	if !strings.Contains(err.Error(), "at byte ") || !strings.Contains(err.Error(), srv.URL+"/trickle/1000") {
		t.Errorf("error %q does not name the URL and the byte reached", err)
	}
	if _, serr := os.Stat(file); !errors.Is(serr, os.ErrNotExist) {
		t.Fatalf("partial output left behind: %v", serr)
	}
}
