package probe_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/netns"
	"github.com/mptester/mptester/internal/nstest"
	"github.com/mptester/mptester/probe"
)

// Tolerances: a notification must arrive within watchDeadline of the change
// (it takes well under a millisecond; the slack is for a loaded CI machine),
// and a quiet namespace must stay quiet for watchQuiet.
const (
	watchDeadline = time.Second
	watchQuiet    = 300 * time.Millisecond
)

// quietLink sets up a link that produces no delayed notifications: a TUN
// with no reader (no carrier, so no linkwatch event a second later) and no
// IPv6 link-local address (no DAD finishing later). The kernel has no dummy
// driver here.
func quietLink(ns *nstest.NS, name, cidr string) {
	ns.IP("tuntap", "add", "dev", name, "mode", "tun")
	ns.IP("link", "set", name, "addrgenmode", "none")
	ns.IP("link", "set", name, "up")
	ns.IP("addr", "add", cidr, "dev", name)
}

// expectQuiet fails if ch delivers anything within d.
func expectQuiet(t *testing.T, ch <-chan time.Time, d time.Duration, after string) {
	t.Helper()
	select {
	case at, ok := <-ch:
		t.Fatalf("after %s: unexpected notification (closed=%v) %v after the quiet period began", after, !ok, time.Since(at))
	case <-time.After(d):
	}
}

// drain swallows the rest of a burst (a link going down also withdraws its
// routes): it returns once ch has been silent for 50 ms.
func drain(ch <-chan time.Time) {
	for {
		select {
		case <-ch:
		case <-time.After(50 * time.Millisecond):
			return
		}
	}
}

// TestWatchChanges: in a namespace of its own, each kind of change a Path
// is made of (link down/up, address added/removed, IPv6 address, default
// route, link appearing/disappearing) is notified within watchDeadline, and
// nothing arrives while nothing changes.
func TestWatchChanges(t *testing.T) {
	ns := nstest.New(t)
	quietLink(ns, "tun0", "198.18.7.1/24")
	if !nstest.InNS(t, ns) {
		return
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch, err := probe.WatchChanges(ctx)
	require.NoError(t, err)
	expectQuiet(t, ch, watchQuiet, "subscribing")

	changes := [][]string{
		{"link", "set", "tun0", "down"},
		{"link", "set", "tun0", "up"},
		{"addr", "add", "198.18.7.2/24", "dev", "tun0"},
		{"addr", "del", "198.18.7.2/24", "dev", "tun0"},
		{"addr", "add", "fd00:7::1/64", "dev", "tun0", "nodad"},
		{"route", "add", "default", "via", "198.18.7.254"},
		{"route", "del", "default"},
		{"tuntap", "add", "dev", "tun1", "mode", "tun"},
		{"link", "del", "tun1"},
	}
	var lat, fromStart []time.Duration
	for _, c := range changes {
		name := "ip " + strings.Join(c, " ")
		start := time.Now()
		if out, err := exec.Command("ip", c...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", name, err, out)
		}
		done := time.Now()
		select {
		case at, ok := <-ch:
			require.True(t, ok, "%s: channel closed", name)
			lat = append(lat, max(at.Sub(done), 0))
			fromStart = append(fromStart, at.Sub(start))
		case <-time.After(watchDeadline):
			t.Fatalf("%s: no notification within %v", name, watchDeadline)
		}
		drain(ch)
	}
	expectQuiet(t, ch, watchQuiet, "the last change")
	slices.Sort(lat)
	slices.Sort(fromStart)
	t.Logf("%d changes: notified after the ip command returned by median %v (max %v); after it started (fork+exec included) by median %v (max %v)",
		len(lat), lat[len(lat)/2], lat[len(lat)-1], fromStart[len(lat)/2], fromStart[len(lat)-1])

	// Cancelling closes the channel: the reader has ended.
	cancel()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-time.After(watchDeadline):
			t.Fatal("channel not closed after cancel")
		}
	}
}

// TestWatchChangesOtherNamespace: the subscription belongs to the namespace
// the calling thread was in; changes in another namespace are not seen.
func TestWatchChangesOtherNamespace(t *testing.T) {
	mine, other := nstest.New(t), nstest.New(t)
	quietLink(mine, "tun0", "198.18.7.1/24")
	quietLink(other, "tun0", "198.18.8.1/24")
	ch := watchIn(t, mine.Name)
	expectQuiet(t, ch, watchQuiet, "subscribing")
	other.IP("link", "set", "tun0", "down")
	expectQuiet(t, ch, watchQuiet, "a change in another namespace")
	mine.IP("link", "set", "tun0", "down")
	select {
	case <-ch:
	case <-time.After(watchDeadline):
		t.Fatalf("no notification within %v", watchDeadline)
	}
}

// watchIn subscribes from inside namespace ns until the test ends.
func watchIn(tb testing.TB, ns string) <-chan time.Time {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	var ch <-chan time.Time
	require.NoError(tb, netns.Do(ns, func() (err error) { ch, err = probe.WatchChanges(ctx); return err }))
	return ch
}

// BenchmarkPathChangeDetection measures how long after `ip link set` returns
// a watcher notices a link going down or up: "netlink" with WatchChanges,
// "poll1s" the way survey's watcher did before (look every second; here
// with net.InterfaceByName, a cheaper look than Discover). Run with
// -benchtime=20x; the metrics are the mean, median and maximum after the ip
// command returned, and the median after it started (an upper bound that
// includes fork+exec of ip: the kernel notifies before ip returns).
func BenchmarkPathChangeDetection(b *testing.B) {
	ns := nstest.New(b)
	quietLink(ns, "tun0", "198.18.7.1/24")
	// toggle returns when the ip command started and when it returned: the
	// change happens in between.
	toggle := func(i int) (time.Time, time.Time) {
		state := []string{"down", "up"}[i%2]
		start := time.Now()
		ns.IP("link", "set", "tun0", state)
		return start, time.Now()
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	report := func(b *testing.B, fromStart, fromDone []time.Duration) {
		slices.Sort(fromStart)
		slices.Sort(fromDone)
		var sum time.Duration
		for _, d := range fromDone {
			sum += d
		}
		b.ReportMetric(ms(sum/time.Duration(len(fromDone))), "ms-mean")
		b.ReportMetric(ms(fromDone[len(fromDone)/2]), "ms-median")
		b.ReportMetric(ms(fromDone[len(fromDone)-1]), "ms-max")
		b.ReportMetric(ms(fromStart[len(fromStart)/2]), "ms-median-from-start")
	}
	b.Run("netlink", func(b *testing.B) {
		ch := watchIn(b, ns.Name)
		var fromStart, fromDone []time.Duration
		for i := 0; b.Loop(); i++ {
			start, done := toggle(i)
			at := <-ch
			fromStart, fromDone = append(fromStart, at.Sub(start)), append(fromDone, max(at.Sub(done), 0))
			drain(ch)
		}
		report(b, fromStart, fromDone)
	})
	b.Run("poll1s", func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		seen := make(chan time.Time, 1)
		go func() {
			if err := netns.Do(ns.Name, func() error { pollFlags(ctx, seen); return nil }); err != nil {
				b.Error(err)
				close(seen)
			}
		}()
		time.Sleep(1100 * time.Millisecond) // the poller has seen the initial state
		var fromStart, fromDone []time.Duration
		for i := 0; b.Loop(); i++ {
			// A change comes at a random phase of the poller's second.
			time.Sleep(rand.N(time.Second))
			start, done := toggle(i)
			at, ok := <-seen
			if !ok {
				b.FailNow()
			}
			fromStart, fromDone = append(fromStart, at.Sub(start)), append(fromDone, max(at.Sub(done), 0))
		}
		report(b, fromStart, fromDone)
	})
}

// pollFlags is the old watcher: every second, look whether tun0's up flag
// changed, and send the time it noticed.
func pollFlags(ctx context.Context, seen chan<- time.Time) {
	last := ""
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ifc, err := net.InterfaceByName("tun0")
		if err != nil {
			continue
		}
		if s := fmt.Sprint(ifc.Flags & net.FlagUp); s != last {
			if last != "" {
				select {
				case seen <- time.Now():
				case <-ctx.Done():
				}
			}
			last = s
		}
	}
}
