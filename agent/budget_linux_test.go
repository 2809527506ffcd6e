//go:build linux

package agent

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/agent/caps"
	"github.com/mptester/mptester/collect/api"
	"github.com/mptester/mptester/internal/nstest"
	"github.com/mptester/mptester/upload"
)

// TestBudgetMeterCutsTask: on a probe whose wwan0 has 1 MB left this
// month, a task that keeps sending on wwan0 (whatever its results will
// record) is ended once the interface's own counters (internal/linkstats)
// counted 1 MB since it started; the cut is reported as a budget refusal
// and the counted bytes are spent from the budget. The probe is a network
// namespace of the test's own with wwan0 a veth to a sink namespace, so
// nothing else moves those counters.
func TestBudgetMeterCutsTask(t *testing.T) {
	probe, sink := nstest.New(t), nstest.New(t)
	probe.Veth("wwan0", sink, "peer0")
	probe.IP("addr", "add", "198.18.7.2/24", "dev", "wwan0")
	sink.IP("addr", "add", "198.18.7.1/24", "dev", "peer0")
	if !nstest.InNS(t, probe) {
		return
	}
	h := newHostile(t)
	h.schedule = `{"revision":1,"tasks":[{"name":"r","type":"run","every":"1h","run":{"servers":["198.18.7.1"],"paths":["wwan0"],"patterns":["ping"],"transports":["tcp"]}}]}`
	const limit = 1_000_000
	c := caps.Defaults()
	c.Budget, c.Public, c.MaxDuration = map[string]int64{"wwan0": limit}, nil, api.Duration(time.Minute)
	c.AllowPrivate = true
	dir := t.TempDir()
	a := &Agent{URL: h.url, Token: "t", Probe: "pi1", Dir: dir, Caps: c, Jitter: func(time.Duration) time.Duration { return 0 },
		HTTP: &http.Client{Transport: upload.Transport(&h.pin, nil)},
		Exec: func(ctx context.Context, _ api.Task, _ []string) error {
			// 1400-byte datagrams at about 10 MB/s until the agent ends it.
			conn, err := net.Dial("udp4", "198.18.7.1:9")
			if err != nil {
				return err
			}
			defer conn.Close()
			buf := make([]byte, 1400)
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-tick.C:
				}
				for range 7 {
					_, _ = conn.Write(buf)
				}
			}
		},
		Upload: func(context.Context, api.UploadPolicy) error { return nil }}
	ran, err := a.RunOnce(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"r"}, ran)
	rep := h.lastReport()
	require.Len(t, rep.Refusals, 1)
	assert.True(t, rep.Refusals[0].Budget)
	assert.Contains(t, rep.Refusals[0].Reason, "cut at the data budget of wwan0")
	var b budget
	raw, err := os.ReadFile(filepath.Join(dir, "budget.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &b))
	spent := b.Months[month(time.Now())]["wwan0"]
	assert.GreaterOrEqual(t, spent, int64(limit), "the counted bytes are spent")
	t.Logf("budget %d bytes, counted %d: overshoot %d bytes at ~10 MB/s (meter every %v)", limit, spent, spent-limit, meterEvery)
}
