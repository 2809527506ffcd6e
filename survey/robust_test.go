package survey

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/report"
	"github.com/mptester/mptester/survey/list"
)

// cancelAfter cancels a run after n records of type typ were written.
type cancelAfter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	typ    string
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if bytes.Contains(p, []byte(`"type":"`+c.typ+`"`)) {
		if c.n--; c.n == 0 {
			c.cancel()
		}
	}
	return c.buf.Write(p)
}

func countsOf(s Summary) any {
	type cell struct {
		P, R string
		T, U int
	}
	var cells []cell
	for _, c := range s.Cells {
		cells = append(cells, cell{c.ProbePath, c.ResolvePath, c.Targets, c.Unresponsive})
	}
	return []any{s.Resolution, s.Overlap, cells, s.Skipped, s.Status}
}

// Interrupt-and-resume gives the same summary as an uninterrupted run,
// whether the interruption comes while probing (resolution done: hang.test
// left out) or while resolving (hang.test's timeouts keep resolution
// running while every other target is probed).
func TestInterruptAndResume(t *testing.T) {
	for _, tc := range []struct {
		name     string
		typ      string
		n        int
		hang     bool
		domains  int
		wantLess int // probe records in the interrupted output must be fewer
	}{
		{"while probing", "probe", 30, false, 9, 104},
		{"while resolving", "resolution", 5, true, 10, 104},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dnsAddr := startDNS(t, defaultZone())
			port := startListener(t)
			cfg := baseConfig(loopback(t, dnsAddr), port)
			cfg.Count, cfg.Rate = 2, 400
			if !tc.hang {
				cfg.Domains = slices.DeleteFunc(slices.Clone(cfg.Domains), func(d Domain) bool { return d.Name == "hang.test" })
			}
			require.Len(t, cfg.Domains, tc.domains)
			resumeMatchesFull(t, cfg, &cancelAfter{typ: tc.typ, n: tc.n}, tc.wantLess)
		})
	}
}

func resumeMatchesFull(t *testing.T, cfg Config, cut *cancelAfter, wantLess int) {
	var full bytes.Buffer
	want, err := runToBuffer(t, context.Background(), cfg, &full)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cut.cancel = cancel
	h, _ := report.NewHeader("survey", "test", cfg.Paths, map[string]any{})
	st, err := report.NewStream(cut, h)
	require.NoError(t, err)
	part, err := Run(ctx, cfg, st)
	st.Close(report.Status(part.Status), "interrupted")
	require.ErrorIs(t, err, ErrInterrupted)
	assert.Equal(t, "partial", part.Status)
	first := records(t, cut.buf.Bytes())
	require.Len(t, first["summary"], 1, "an interrupted run still writes its summary")
	assert.Contains(t, string(first["trailer"][0]), `"status":"partial"`)
	require.Less(t, len(first["probe"]), wantLess)
	require.LessOrEqual(t, len(first["resolution"]), len(cfg.Domains))

	cfg.ResumeFrom = bytes.NewReader(cut.buf.Bytes())
	var second bytes.Buffer
	got, err := runToBuffer(t, context.Background(), cfg, &second)
	require.NoError(t, err)
	assert.Equal(t, countsOf(want), countsOf(got))
	require.NoError(t, report.ValidateStream(bytes.NewReader(cut.buf.Bytes())), "interrupted output")
	require.NoError(t, report.ValidateStream(bytes.NewReader(second.Bytes())), "resumed output")
	recs := records(t, second.Bytes())
	assert.Len(t, recs["resolution"], len(cfg.Domains))
	assert.Len(t, recs["probe"], 104, "every target exactly once")
	seen := map[string]bool{}
	for _, b := range recs["probe"] {
		var p ProbeRecord
		require.NoError(t, json.Unmarshal(b, &p))
		k := p.ProbePath + " " + p.Address.String()
		assert.False(t, seen[k], "probed twice: %s", k)
		seen[k] = true
	}
	// The first run's records were copied verbatim.
	for _, b := range first["probe"] {
		assert.Contains(t, second.String(), string(b))
	}
}

// An unreachable resolver gives TIMEOUT for every domain on that path, a
// path without DNS resolves nothing, and the run completes for the rest.
func TestUnreachableResolverAndPathWithoutDNS(t *testing.T) {
	// A UDP socket that never answers stands for a dead resolver.
	dead, err := netListenUDP()
	require.NoError(t, err)
	defer dead.Close()
	dnsAddr := startDNS(t, defaultZone())
	port := startListener(t)
	good := loopback(t, dnsAddr)
	bad := good
	bad.Name = "lo" // same device, different resolver set
	bad.DNS = []probe.DNSServer{{Addr: netip.MustParseAddrPort(dead.LocalAddr().String())}}
	none := good
	none.DNS = nil

	cfg := baseConfig(bad, port)
	cfg.Domains = cfg.Domains[:2]
	cfg.DNSTimeout = 100 * time.Millisecond
	var logs bytes.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	var out bytes.Buffer
	s, err := runToBuffer(t, context.Background(), cfg, &out)
	require.NoError(t, err)
	assert.Contains(t, logs.String(), "are its DNS servers reachable")
	assert.Equal(t, map[string]int{StatusTimeout: 2}, s.Resolution[0].ByStatus)
	assert.Equal(t, 0, s.Cells[0].Targets)

	cfg = baseConfig(none, port)
	logs.Reset()
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	out.Reset()
	s, err = runToBuffer(t, context.Background(), cfg, &out)
	assert.ErrorIs(t, err, ErrIncomplete)
	assert.Contains(t, logs.String(), "has no usable DNS server")
	assert.Equal(t, "partial", s.Status)
	assert.Empty(t, s.Resolution)
}

func TestMaxBytesBudget(t *testing.T) {
	dnsAddr := startDNS(t, defaultZone())
	port := startListener(t)
	cfg := baseConfig(loopback(t, dnsAddr), port)
	var out bytes.Buffer
	full, err := runToBuffer(t, context.Background(), cfg, &out)
	require.NoError(t, err)
	cfg.MaxBytes = map[string]int64{"lo": full.BytesSent["lo"] / 2}
	out.Reset()
	s, err := runToBuffer(t, context.Background(), cfg, &out)
	require.NoError(t, err)
	assert.LessOrEqual(t, s.BytesSent["lo"], cfg.MaxBytes["lo"])
	require.Len(t, s.Skipped, 1)
	assert.Equal(t, SkipMaxBytes, s.Skipped[0].Reason)
	assert.Equal(t, 104, s.Cells[0].Targets+s.Skipped[0].Count)
	assert.Greater(t, s.Cells[0].Targets, 10)
}

func TestPolicy(t *testing.T) {
	w := probe.Path{Name: "wlan0", Addrs: []probe.Addr{{IP: netip.MustParseAddr("198.18.1.2"), PrefixLen: 24, Scope: probe.ScopeGlobal},
		{IP: netip.MustParseAddr("fd00:1::2"), PrefixLen: 64, Scope: probe.ScopeGlobal}}}
	l := probe.Path{Name: "wwan0", Addrs: []probe.Addr{{IP: netip.MustParseAddr("198.18.2.2"), PrefixLen: 24, Scope: probe.ScopeGlobal}}}
	pol := Policy{Public: []netip.Prefix{netip.MustParsePrefix("198.19.0.0/17"), netip.MustParsePrefix("fd00:ff::/64")}}
	a := netip.MustParseAddr
	for _, tc := range []struct {
		p, r probe.Path
		addr string
		want string
	}{
		{w, l, "198.19.0.5", ""},                  // lab public
		{w, l, "198.19.128.5", SkipCrossPrivate},  // lab private, other path
		{l, l, "198.19.128.5", ""},                // lab private, own path
		{w, l, "10.1.2.3", SkipCrossPrivate},      // RFC 1918
		{w, w, "224.0.0.1", SkipNeverProbe},       // multicast, even own path
		{w, w, "255.255.255.255", SkipNeverProbe}, // broadcast
		{w, w, "198.18.1.255", SkipNeverProbe},    // directed broadcast of the path's subnet
		{w, l, "fd00:fe::1", SkipCrossPrivate},    // lab private v6
		{w, l, "fd00:ff::1", ""},                  // lab public v6
		{l, l, "fd00:ff::1", SkipNoSource},        // wwan0 has no IPv6 here
		{w, l, "8.8.8.8", ""},                     // public
		{w, l, "ff02::1", SkipNeverProbe},         // v6 multicast
	} {
		assert.Equal(t, tc.want, pol.Check(tc.p, tc.r, a(tc.addr)), "%s from %s resolved on %s", tc.addr, tc.p.Name, tc.r.Name)
	}
	pol.AllowCrossPrivate = true
	assert.Equal(t, "", pol.Check(w, l, a("10.1.2.3")))
	assert.Equal(t, SkipNeverProbe, pol.Check(w, l, a("224.0.0.1")))

	// NoPrivate (a fleet task): no private address from any path, nor one
	// on the host's own subnets even where the owner declared it public.
	pol = Policy{Public: []netip.Prefix{netip.MustParsePrefix("198.19.0.0/17"), netip.MustParsePrefix("192.0.2.0/24")},
		NoPrivate: true, Local: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}}
	for addr, want := range map[string]string{"198.19.128.5": SkipPrivate, "10.1.2.3": SkipPrivate, "fd00:fe::1": SkipPrivate,
		"192.0.2.7": SkipPrivate, "198.19.0.5": "", "8.8.8.8": "", "224.0.0.1": SkipNeverProbe} {
		assert.Equal(t, want, pol.Check(l, l, a(addr)), "%s from its own path", addr)
	}
	pol.AllowCrossPrivate = true // NoPrivate wins
	assert.Equal(t, SkipPrivate, pol.Check(l, l, a("10.1.2.3")))
}

func TestLimiter(t *testing.T) {
	now := time.Unix(1000, 0)
	l := NewLimiter(100, 5)
	l.now = func() time.Time { return now }
	// After a pause, a burst of 5 goes at once, then one per 10 ms.
	var got []time.Duration
	for range 8 {
		got = append(got, l.Reserve().Sub(now))
	}
	want := []time.Duration{0, 0, 0, 0, 0, 10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond}
	assert.Equal(t, want, got)
	// Long-run rate: 1000 reservations span 1000/rate minus the burst.
	l = NewLimiter(1000, 1)
	l.now = func() time.Time { return now }
	var last time.Time
	for range 1000 {
		last = l.Reserve()
	}
	assert.Equal(t, 999*time.Millisecond, last.Sub(now))
	// Unlimited never waits.
	assert.False(t, NewLimiter(0, 1).Reserve().After(time.Now()))
}

func TestLimiterRealTime(t *testing.T) {
	l := NewLimiter(500, 1)
	start := time.Now()
	for range 100 {
		require.NoError(t, l.Wait(context.Background()))
	}
	el := time.Since(start)
	// 99 intervals of 2 ms; timers may be late but never early.
	assert.GreaterOrEqual(t, el, 198*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l2 := NewLimiter(0.5, 1)
	l2.Reserve()
	assert.Error(t, l2.Wait(ctx))
}

func TestWatcherMarksChangedPath(t *testing.T) {
	w := newWatcher()
	p := probe.Path{Name: "wlan0", Up: true, Addrs: []probe.Addr{{IP: netip.MustParseAddr("198.18.1.2")}}}
	q := probe.Path{Name: "wwan0", Up: true, Addrs: []probe.Addr{{IP: netip.MustParseAddr("198.18.2.2")}}}
	w.check([]probe.Path{p, q}, []probe.Path{p, q}, time.Now())
	assert.True(t, w.valid("wlan0", "wwan0"))
	p2 := p
	p2.Addrs = []probe.Addr{{IP: netip.MustParseAddr("198.18.1.3")}}
	q2 := q
	q2.Up = false
	w.check([]probe.Path{p, q}, []probe.Path{p2, q2}, time.Now())
	assert.False(t, w.valid("wlan0"))
	assert.False(t, w.valid("wwan0"))
	recs := w.records([]string{"wlan0", "wwan0"})
	require.Len(t, recs, 2)
	assert.Contains(t, recs[0].Reason, "addresses changed")
	assert.Equal(t, "interface went down", recs[1].Reason)
}

// A path that changes mid-run makes the run invalid: later records carry
// "valid": false and the summary lists the path.
func TestRunDetectsPathChange(t *testing.T) {
	dnsAddr := startDNS(t, defaultZone())
	port := startListener(t)
	lo := loopback(t, dnsAddr)
	cfg := baseConfig(lo, port)
	cfg.Rate = 300
	cfg.WatchInterval = 20 * time.Millisecond
	calls := 0
	cfg.Discover = func(context.Context) ([]probe.Path, error) {
		calls++
		if calls < 3 {
			return []probe.Path{lo}, nil
		}
		down := lo
		down.Up = false
		return []probe.Path{down}, nil
	}
	var out bytes.Buffer
	s, err := runToBuffer(t, context.Background(), cfg, &out)
	require.ErrorIs(t, err, ErrPathChanged)
	assert.Equal(t, "invalid", s.Status)
	require.Len(t, s.Invalid, 1)
	assert.Equal(t, "lo", s.Invalid[0].Path)
	assert.Contains(t, out.String(), `"valid":false`)
}

func FuzzResume(f *testing.F) {
	f.Add([]byte(`{"type":"header","command":"survey"}` + "\n" + `{"type":"resolution","domain":"a.test","path":"lo","status":"NOERROR","answers":["127.0.0.1"]}` + "\n" +
		`{"type":"probe","probe_path":"lo","address":"127.0.0.1","method":"tcp-connect","responsive":true,"median":1.5}` + "\n"))
	f.Add([]byte(`{"type":"probe","address":"zz"}` + "\n{"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := &runner{cfg: Config{Method: "tcp-connect"}, list: list.NewDomainList([]Domain{{Rank: 1, Name: "a.test"}}),
			status: map[string][]uint8{"lo": make([]uint8, 1)}, names: []string{"lo"}, results: map[string]map[netip.Addr]TargetResult{"lo": {}},
			bytes: map[string]*atomicInt{"lo": new(atomicInt)}, log: discardLogger()}
		h, _ := report.NewHeader("survey", "t", []report.Path(nil), nil)
		st, _ := report.NewStream(&bytes.Buffer{}, h)
		r.out = st
		_ = r.resume(bytes.NewReader(b)) // must not panic
	})
}
