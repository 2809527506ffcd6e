//go:build linux && !race

package patterns

import (
	"testing"
	"time"

	"github.com/mptester/mptester/probe"
)

// TestLabHTTP3PingQUICvsMPQUIC: over one idle lab path (10 ms round
// trip) the ping pattern over quic (quic-go's HTTP/3) and over mpquic
// (mpquic/h3) is the same exchange through the same framing: both record
// ALPN h3 and HTTP/3.0, and their request medians are within 10 % of
// each other (the path's planted 10 ms dominates both).
func TestLabHTTP3PingQUICvsMPQUIC(t *testing.T) {
	l, ok := startRatedLab(t, 14, 50)
	if !ok {
		return
	}
	p := Params{PingCount: 20, PingGap: 20 * time.Millisecond}
	medians := map[string]time.Duration{}
	for _, tr := range []string{quicName, "mpquic"} {
		rec := labRunPaths(t, l, "ping", tr, "wlan0", probe.Family4, p, false)
		if rec.Status != StatusSuccess {
			t.Fatalf("%s: %s %s", tr, rec.Status, rec.Error)
		}
		r := rec.Result.(*PingResult)
		if r.Proto != "HTTP/3.0" || rec.Connections[0].ALPN != "h3" {
			t.Errorf("%s: %s with ALPN %s, want HTTP/3.0 and h3", tr, r.Proto, rec.Connections[0].ALPN)
		}
		medians[tr] = r.Median
		t.Logf("%s: median %v over %d requests", tr, r.Median, len(r.Delays)+1)
	}
	q, m := medians[quicName], medians["mpquic"]
	if d := q - m; d > q/10 || -d > q/10 {
		t.Errorf("ping medians quic %v, mpquic %v: more than 10%% apart", q, m)
	}
}
