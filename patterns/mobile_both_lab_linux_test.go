//go:build linux && !race

package patterns

import (
	"encoding/json"
	"math"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/labtest"
	"github.com/mptester/mptester/patterns/mobile"
)

// TestLabMobileSideBySide: mobile mode as it runs by default, every
// handover transport at once (mptcp, quic-handover and mpquic), each with its own
// connections, through every lab scenario. Both keep their interactive
// streams across it; a backup is never used before the scenario's first
// step; in the abrupt scenarios (Wi-Fi dies at once) both hand over and
// both durations come out negative; quic-handover's cause is under-rto
// where its rule applies (the black hole: timeouts in progress with data
// to send); the run has MPTCP's max-delay ratio to each other transport
// (000 Fig. 8); the captured bytes of the transports together equal the
// emulator's per path.
func TestLabMobileSideBySide(t *testing.T) {
	both := HandoverTransports()
	if !slices.Contains(both, mptcpName) || !slices.Contains(both, "quic-handover") || !slices.Contains(both, "mpquic") {
		t.Fatalf("handover transports %v", both)
	}
	for _, scn := range lab.Scenarios() {
		sc := scn.Name
		t.Run(sc, func(t *testing.T) {
			l := labtest.Start(t, lab.Options{Domains: 0, Seed: 12, CellBackup: true})
			startLabServer(t, l)
			if !l.InClient(t) {
				return
			}
			defer exec.Command("ip", "link", "set", "wlan0", "up").Run()
			l.Set(t, "wlan0", "delay=10ms", "jitter=0s", "loss=0")
			l.Set(t, "wwan0", "delay=30ms", "jitter=0s", "loss=0")
			rec, _, before, after, _ := mobileLabRun(t, l, sc, nil, 11*time.Second, "")
			if len(rec.Transports) != len(both) {
				t.Fatalf("transports %+v", rec.Transports)
			}
			for _, mt := range rec.Transports {
				h := mt.Handover
				js, _ := json.Marshal(h)
				t.Logf("%s %s: status %s %s; handover %s; up max %v, down max %v", sc, mt.Transport, mt.Status, mt.Error, js, mt.Upload.Max, mt.Download.Max)
				if mt.Status != StatusSuccess {
					t.Errorf("%s: streams cut: %s %s", mt.Transport, mt.Status, mt.Error)
				}
				if h.Status != mobile.StatusHandover {
					if scn.Abrupt {
						t.Errorf("%s: Wi-Fi died and the handover status is %s", mt.Transport, h.Status)
					}
					continue
				}
				// Ground truth: the backup is first used after the
				// scenario's first step took effect, not before (a switch
				// off a healthy Wi-Fi).
				if tl := after.Timeline; tl != nil && len(tl.Steps) > 0 {
					if first := mt.StartedAt.Add(h.FirstBackupData); first.Before(tl.Steps[0].Applied.Add(-150 * time.Millisecond)) {
						t.Errorf("%s: backup first used at %v, before the scenario's step (%v)", mt.Transport,
							first.Format("15:04:05.000"), tl.Steps[0].Applied.Format("15:04:05.000"))
					}
				}
				if scn.Abrupt && h.DurationReceived >= 0 {
					t.Errorf("%s: abrupt loss, duration (received) %v not negative", mt.Transport, h.DurationReceived)
				}
				if mt.Transport == "quic-handover" && sc == "wifi-blackhole" && h.Cause != mobile.CauseUnderRTO {
					t.Errorf("quic-handover's cause %s in a black hole, want under-rto (primary state %+v)", h.Cause, h.PrimaryState)
				}
			}
			if len(rec.Ratios) != len(both)-1 {
				t.Errorf("max-delay ratios %+v, want MPTCP's to each of the %d others", rec.Ratios, len(both)-1)
			}
			for _, r := range rec.Ratios {
				if r.Other == mptcpName || !slices.Contains(both, r.Other) || r.Upload <= 0 || r.Download <= 0 {
					// Every stream carried chunks, so both maxima exist.
					t.Errorf("MPTCP/%s max-delay ratio %+v", r.Other, r)
				}
			}
			t.Logf("%s: ratios %+v", sc, rec.Ratios)
			for i, name := range lab.PathNames {
				var sent, recv uint64
				for _, mt := range rec.Transports {
					for _, b := range mt.CapturedBytes {
						if b.Path == name {
							sent, recv = sent+b.Sent, recv+b.Received
						}
					}
				}
				up := after.Paths[i].Stats.Up.BytesIn - before.Paths[i].Stats.Up.BytesIn
				down := after.Paths[i].Stats.Down.BytesDelivered - before.Paths[i].Stats.Down.BytesDelivered
				for _, c := range []struct {
					what      string
					got, want uint64
				}{{"sent", sent, up}, {"received", recv, down}} {
					if math.Abs(float64(c.got)-float64(c.want)) > max(0.02*float64(c.want), 300) {
						t.Errorf("%s %s: captured %d bytes (all transports), emulator %d", name, c.what, c.got, c.want)
					}
				}
			}
		})
	}
}
