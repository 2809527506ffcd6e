//go:build linux && !race

package fetch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
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
		ln, err := l.Lab.ListenTCP(fmt.Sprintf(":%d", port), false)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("ETag", patterns.BulkETag(size))
			http.ServeContent(w, r, "", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), patterns.NewBulkBody(size))
		})}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
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
