//go:build linux && !race

package fetch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/labtest"
	"github.com/mptester/mptester/mphttp"
	"github.com/mptester/mptester/patterns"
	"github.com/mptester/mptester/probe"
)

// TestLabFetchTwoPaths: `fetch` over wlan0 and wwan0 of the lab, each
// connection bound to its path: both carry part of the object (the
// emulator's counters agree) and the file is the object.
func TestLabFetchTwoPaths(t *testing.T) {
	l := labtest.Start(t, lab.Options{Domains: 0, Seed: 16})
	const port, size = 8082, 4_000_000
	if !labtest.IsChild() {
		serveBulk(t, l, port, size)
	}
	for _, p := range lab.PathNames {
		l.Set(t, p, "delay=10ms", "jitter=0s", "loss=0", "rate=10mbit")
	}
	if l.InClient(t) {
		io, out, _ := cmdutil.Test()
		file := filepath.Join(t.TempDir(), "obj")
		paths := l.Paths(t)
		opts := &Options{IO: io, URL: fmt.Sprintf("http://%s:%d/obj", lab.Server4, port), Paths: []string{"wlan0", "wwan0"},
			Family: "any", Tolerance: 100 * time.Millisecond, MemoryCap: mphttp.DefaultMemoryCap, Output: file, JSON: true,
			Discover: func(context.Context) ([]probe.Path, error) { return paths, nil }}
		down := func() map[string]uint64 {
			m := map[string]uint64{}
			for _, p := range l.Status(t).Paths {
				m[p.Name] = p.Stats.Down.BytesDelivered
			}
			return m
		}
		before := down()
		if err := fetchRun(context.Background(), opts); err != nil {
			t.Fatal(err)
		}
		after := down()
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want(t, size)) {
			t.Fatalf("output of %d bytes differs from the object", len(got))
		}
		var res mphttp.Result
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatal(err)
		}
		if res.Consistency != mphttp.Verified || len(res.Paths) != 2 || res.Paths[0].Bytes == 0 || res.Paths[1].Bytes == 0 {
			t.Fatalf("want both paths used and verified: %s", out)
		}
		// Ground truth: the emulator delivered each path's share on that
		// path (IP packets: the body plus TCP/IP and HTTP headers, <8% +
		// 20 KB for handshakes and requests).
		for _, p := range res.Paths {
			wire := after[p.Name] - before[p.Name]
			t.Logf("%s: body %d B, emulator delivered %d B", p.Name, p.Received, wire)
			if wire < uint64(p.Received) || float64(wire) > 1.08*float64(p.Received)+20e3 {
				t.Errorf("%s: emulator delivered %d B down for a body share of %d B", p.Name, wire, p.Received)
			}
		}
	}
}

// TestLabFetchCachingMiddlebox: the cellular path passes a caching
// middlebox that answers with another version of the object (003 §4.3):
// the server answers the cellular subnet's addresses from a stale copy.
// On port A the stale copy keeps the current validators (a cache that
// rewrites the body only: only the overlap check can see it); on port B
// it has its own ETag. Both are detected, the download falls back to
// Wi-Fi, the result says why, and the file is the current object, never
// a splice of the two. With its own ETag the stale copy is refused from
// the response headers, before any of its body is read.
func TestLabFetchCachingMiddlebox(t *testing.T) {
	l := labtest.Start(t, lab.Options{Domains: 0, Seed: 17})
	const portA, portB, size = 8083, 8084, 4_000_000
	cellular := []netip.Prefix{netip.MustParsePrefix("198.18.2.0/24"), netip.MustParsePrefix("fd00:2::/64")}
	if !labtest.IsChild() {
		current := want(t, size)
		stale := bytes.Clone(current)
		for i := range stale {
			stale[i] ^= 0x5a
		}
		for _, c := range []struct {
			port      int
			staleETag string
		}{{portA, patterns.BulkETag(size)}, {portB, `"stale-copy"`}} {
			ln, err := l.Lab.ListenTCP(fmt.Sprintf(":%d", c.port), false)
			if err != nil {
				t.Fatal(err)
			}
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, etag := current, patterns.BulkETag(size)
				if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil && (cellular[0].Contains(ap.Addr().Unmap()) || cellular[1].Contains(ap.Addr())) {
					body, etag = stale, c.staleETag
				}
				w.Header().Set("ETag", etag)
				http.ServeContent(w, r, "", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), bytes.NewReader(body))
			})}
			go srv.Serve(ln)
			t.Cleanup(func() { srv.Close() })
		}
	}
	for _, p := range lab.PathNames {
		l.Set(t, p, "delay=10ms", "jitter=0s", "loss=0", "rate=10mbit")
	}
	if l.InClient(t) {
		paths := l.Paths(t)
		for _, c := range []struct {
			port    int
			verdict string
		}{{portA, mphttp.OverlapDiffers}, {portB, mphttp.ValidatorsDiffer}} {
			io, out, _ := cmdutil.Test()
			file := filepath.Join(t.TempDir(), "obj")
			opts := &Options{IO: io, URL: fmt.Sprintf("http://%s:%d/obj", lab.Server4, c.port), Paths: []string{"wlan0", "wwan0"},
				Family: "any", Tolerance: 100 * time.Millisecond, MemoryCap: mphttp.DefaultMemoryCap, Output: file, JSON: true,
				Discover: func(context.Context) ([]probe.Path, error) { return paths, nil }}
			if err := fetchRun(context.Background(), opts); err != nil {
				t.Fatalf("port %d: %v", c.port, err)
			}
			var res mphttp.Result
			if err := json.Unmarshal(out.Bytes(), &res); err != nil {
				t.Fatal(err)
			}
			t.Logf("port %d: consistency %s, fallback %q, paths %+v", c.port, res.Consistency, res.Fallback, res.Paths)
			if res.Consistency != c.verdict || res.Fallback == "" {
				t.Errorf("port %d: consistency %q (fallback %q), want %q with a reason", c.port, res.Consistency, res.Fallback, c.verdict)
			}
			if len(res.Paths) != 2 || res.Paths[1].Requests == 0 {
				t.Fatalf("port %d: the cellular path was never asked, so nothing was checked: %+v", c.port, res.Paths)
			}
			// Validators that differ stop the cellular path at its
			// response headers: not one body byte is read. Equal ones
			// need the overlap's bytes to tell.
			if got := res.Paths[1].Received; (c.verdict == mphttp.ValidatorsDiffer) != (got == 0) {
				t.Errorf("port %d: the cellular path read %d body bytes before the %s verdict", c.port, got, c.verdict)
			}
			got, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want(t, size)) {
				t.Errorf("port %d: the output (%d bytes) is not the current object", c.port, len(got))
			}
		}
	}
}

// serveBulk serves the bulk object of size bytes (ranges, strong ETag) over
// plain HTTP on port of the lab's server addresses, until the test ends.
func serveBulk(t testing.TB, l *labtest.Lab, port int, size int64) {
	ln, err := l.Lab.ListenTCP(fmt.Sprintf(":%d", port), false)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { patterns.ServeBulk(w, r, size) })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}
