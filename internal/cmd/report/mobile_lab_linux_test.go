//go:build linux && !race

package report_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmd"
	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/labtest"
)

// TestLabMobileReportEqualsTruth: `mptester run --mode mobile` (MPTCP,
// cellular as backup) through the lab's wifi-blackhole scenario, then
// `mptester report` on its result: Table I names the planted cause
// (under-rto: Wi-Fi loses everything while data is pending), and the
// handover duration of 000 Fig. 6 (received end) equals the emulator's
// packet times (the first data on wwan0, the last packet wlan0 delivered)
// within 150 ms, negative (Wi-Fi died first).
func TestLabMobileReportEqualsTruth(t *testing.T) {
	labtest.Require(t)
	t.Setenv(envMain, "1")
	l := labtest.Start(t, lab.Options{Domains: 0, Seed: 21, CellBackup: true})
	info := l.Config()
	const port = 8443
	startTestServer(t, l, port)
	l.Set(t, "wlan0", "delay=10ms", "jitter=0s", "loss=0", "rate=0")
	l.Set(t, "wwan0", "delay=30ms", "jitter=0s", "loss=0", "rate=0")
	exe, err := os.Executable()
	require.NoError(t, err)
	out := filepath.Join(info.Dir, "mobile.json")
	l.Scenario(t, "wifi-blackhole")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	b, err := l.Exec(ctx, "client", exe, "run", "--mode", "mobile", "--server", lab.Server4.String(), "--family", "4",
		"--tcp-port", fmt.Sprint(port), "--quic-port", fmt.Sprint(port), "--insecure", "--transports", "mptcp",
		"--paths", "wlan0,wwan0", "--backup", "wwan0", "--duration", "10s", "--grace", "3s",
		"--no-upload", "--log-level", "warn", "--output", out)
	cancel()
	defer exec.Command("ip", "netns", "exec", info.Namespaces.Client, "ip", "link", "set", "wlan0", "up").Run()
	require.NoError(t, err, "mobile run in the lab: %s", b)
	st := l.Status(t)
	wl, ww := st.Paths[0].Stats, st.Paths[1].Stats
	require.False(t, ww.Up.Activity.FirstDataIn.IsZero(), "the emulator saw no data on wwan0")

	report := func(section string) [][]string {
		ios, o, errOut := cmdutil.Test()
		code := cmd.Run(context.Background(), ios, []string{"report", "--format", "csv", "--section", section, out})
		require.Equal(t, 0, code, errOut.String())
		rows, err := csv.NewReader(strings.NewReader(o.String())).ReadAll()
		require.NoError(t, err)
		return rows[1:]
	}
	causes := map[string]string{}
	for _, row := range report("mobile-causes") { // transport, cause, tests, pct
		causes[row[1]] = row[2]
	}
	require.Equal(t, map[string]string{"rtt-threshold": "0", "under-rto": "1", "rto-threshold": "0", "other": "0"}, causes,
		"Table I: the planted cause")

	// The received end is sharp: Wi-Fi delivered its last packet when the
	// black hole opened. The sent end is not: Wi-Fi retransmits into the
	// hole until the connections are torn down, and the capture stops
	// about a second after the streams (the emulator keeps counting), so
	// only its sign is checked: Wi-Fi was still sending after cellular
	// was first used.
	want := wl.Down.Activity.LastOut.Sub(ww.Up.Activity.FirstDataIn)
	got := map[string]time.Duration{}
	for _, row := range report("handover-duration-cdf") { // transport, end, duration_s, cdf
		got[row[1]] = time.Duration(f64(t, row[2]) * float64(time.Second))
	}
	require.Len(t, got, 2, "both Wi-Fi liveliness ends")
	t.Logf("handover duration: received %v (emulator %v), sent %v", got["received"], want, got["sent"])
	if math.Abs(float64(got["received"]-want)) > float64(150*time.Millisecond) {
		t.Errorf("handover duration (received): report %v, emulator truth %v", got["received"], want)
	}
	if got["sent"] <= 0 {
		t.Errorf("handover duration (sent) %v: Wi-Fi sent into the black hole after cellular was used", got["sent"])
	}
	if got["received"] >= 0 {
		t.Errorf("Wi-Fi stopped delivering before cellular was used: want a negative duration, got %v", got["received"])
	}
}
