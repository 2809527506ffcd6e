//go:build linux && !race

package survey_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/labtest"
	"github.com/mptester/mptester/lab/world"
	"github.com/mptester/mptester/report"
	. "github.com/mptester/mptester/survey"
)

// TestLabSurveyOverloaded is issue 18's acceptance test: the survey is
// overloaded on purpose (the receive loop slowed to about 1 ms per packet
// with a stall of 1.5 s every 300 packets, a 16 KB receive buffer, 3000
// probes/s asked) in the lab world of TestLabSurveyMatchesTruth, with one
// probe per target so that any reply the host loses would otherwise turn a
// responsive target unresponsive (without re-probing 95 did, without the
// watermark wait 94).
// No target that truth says answers may be reported unresponsive without
// the host_overloaded mark, unless the lab itself lost or delayed enough
// packets to explain it (the emulator's own drops and deliveries more than
// 100 ms late, Count of them per target); the summary says the run was
// degraded and why (socket drops seen), and a run with marked targets
// ends partial with ErrDegraded carrying the same reason (the trailer's).
func TestLabSurveyOverloaded(t *testing.T) {
	l := labtest.Start(t, lab.Options{Domains: 150, WorldSeed: 11})
	if !l.InClient(t) {
		return
	}
	var truth world.Truth
	l.Truth(t, &truth)
	cfg := labConfig(t, l, &truth, "tcp-syn")
	cfg.Rate, cfg.Burst, cfg.Count = 3000, 50, 1
	var n atomic.Int64
	defer SetOverloadHooks(func() {
		if n.Add(1)%300 == 0 {
			time.Sleep(1500 * time.Millisecond)
		} else {
			time.Sleep(time.Millisecond)
		}
	}, 16<<10)()

	before := l.Status(t)
	var out bytes.Buffer
	h, err := report.NewHeader("survey", "lab", cfg.Paths, map[string]any{})
	require.NoError(t, err)
	st, err := report.NewStream(&out, h)
	require.NoError(t, err)
	t0 := time.Now()
	got, runErr := Run(context.Background(), cfg, st)
	el := time.Since(t0)
	after := l.Status(t)

	var labLoss uint64
	for i, p := range after.Paths {
		b := before.Paths[i].Stats
		for _, d := range []struct{ now, was uint64 }{
			{p.Stats.Up.LabLoss(100 * time.Millisecond), b.Up.LabLoss(100 * time.Millisecond)},
			{p.Stats.Down.LabLoss(100 * time.Millisecond), b.Down.LabLoss(100 * time.Millisecond)},
		} {
			labLoss += d.now - d.was
		}
	}
	require.NotNil(t, got.Degraded, "an overloaded run must say so")
	t.Logf("%v; degraded: %s", el.Round(time.Millisecond), got.Degraded.Reason)
	t.Logf("lab's own loss (drops, deliveries >100 ms late): %d packets", labLoss)
	assert.Positive(t, got.Degraded.SocketDrops, "a 16 KB buffer behind a slowed loop drops")
	assert.Contains(t, got.Degraded.Reason, "dropped by the probe sockets' receive queues")
	if got.Degraded.HostOverloaded > 0 {
		assert.Equal(t, "partial", got.Status)
		require.True(t, errors.Is(runErr, ErrDegraded), "err %v", runErr)
		assert.Contains(t, runErr.Error(), got.Degraded.Reason, "the trailer's reason")
	} else {
		require.NoError(t, runErr)
		assert.Equal(t, "ok", got.Status)
	}

	var wrong, marked, falseAnswer, records int
	for _, b := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var p ProbeRecord
		require.NoError(t, json.Unmarshal(b, &p))
		if p.Type != "probe" {
			continue
		}
		records++
		_, reachable := truth.ExpectedRTTms[p.ProbePath][p.Address]
		switch {
		case p.HostOverloaded:
			marked++
			assert.False(t, p.Responsive)
		case reachable && !p.Responsive:
			wrong++
			t.Logf("%s from %s reported unresponsive without the mark (%d probes again)", p.Address, p.ProbePath, p.Reprobed)
		case !reachable && p.Responsive:
			falseAnswer++
		}
	}
	t.Logf("%d probe records: %d marked host_overloaded, %d re-probed targets, %d unmarked wrong", records, marked, got.Degraded.Reprobed, wrong)
	assert.Equal(t, got.Degraded.HostOverloaded, marked)
	assert.Zero(t, falseAnswer, "an unreachable target cannot answer")
	if wrong > 0 {
		// Each wrongly silent target lost Count replies; only the lab's
		// own loss can excuse them.
		assert.LessOrEqual(t, uint64(wrong*cfg.Count), labLoss,
			"%d responsive targets reported unresponsive without the overload mark: the lab lost %d packets, fewer than they need, so the survey is wrong", wrong, labLoss)
	}
	// The cells never count a marked target as unresponsive.
	for i, w := range truth.Summary.Cells {
		g := got.Cells[i]
		assert.Equal(t, w.Targets, g.Targets)
		assert.LessOrEqual(t, g.Unresponsive, w.Unresponsive+wrong, "unresponsive of %s/%s", g.ProbePath, g.ResolvePath)
	}
}
