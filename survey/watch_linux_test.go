package survey

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/nstest"
	"github.com/mptester/mptester/probe"
)

// TestWatcherNotifiedOfChange: with the safety ticker set to an hour, only
// the kernel's notification can make the watcher re-discover, so a path
// marked invalid within a second proves the notification drove it. The
// record is dated between the start of the change and its detection.
func TestWatcherNotifiedOfChange(t *testing.T) {
	ns := nstest.New(t)
	// A TUN with no reader and no IPv6 link-local address: no delayed
	// carrier or DAD notification.
	ns.IP("tuntap", "add", "dev", "wlan0", "mode", "tun")
	ns.IP("link", "set", "wlan0", "addrgenmode", "none")
	ns.IP("link", "set", "wlan0", "up")
	ns.IP("addr", "add", "198.18.9.2/24", "dev", "wlan0")
	if !nstest.InNS(t, ns) {
		return
	}
	discover := func(ctx context.Context) ([]probe.Path, error) { return probe.Discover(ctx, probe.DiscoverOptions{}) }
	initial, err := discover(t.Context())
	require.NoError(t, err)
	w := newWatcher()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { w.run(ctx, discover, time.Hour, initial); close(done) }()
	defer func() { cancel(); <-done }()
	time.Sleep(200 * time.Millisecond) // subscribed; nothing changed yet
	require.True(t, w.valid("wlan0", "lo"), "marked invalid while nothing changed: %+v", w.records([]string{"wlan0", "lo"}))

	start := time.Now()
	out, err := exec.Command("ip", "link", "set", "wlan0", "down").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deadline := time.Now().Add(time.Second)
	for w.valid("wlan0") && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	seen := time.Now()
	recs := w.records([]string{"wlan0", "lo"})
	require.Len(t, recs, 1, "wlan0 not marked within 1 s")
	require.Equal(t, "interface went down", recs[0].Reason)
	at, err := time.Parse(time.RFC3339Nano, recs[0].At)
	require.NoError(t, err)
	require.False(t, at.Before(start) || at.After(seen), "dated %v, change between %v and %v", at, start, seen)
	t.Logf("marked %v after the ip command started", seen.Sub(start))

	cancel()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("run did not return after cancel")
	}
}
