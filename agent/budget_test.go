package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/agent/caps"
	"github.com/mptester/mptester/collect/api"
	"github.com/mptester/mptester/upload"
)

// TestDataBudget: with a 5 MB monthly budget on wwan0, a 2 MB bulk run
// every minute runs while the bytes its results record leave room for the
// next (twice: 4.1 MB), is then skipped and says so (logged, and in the
// collector's probe list), keeps the count across a restart of the agent
// (state directory), and runs again in the next month (fake clock).
func TestDataBudget(t *testing.T) {
	f := newFleet(t)
	const bulk = 2_000_000
	f.setSchedule(t, "*", fmt.Sprintf(`{"tasks":[{"name":"bulk","type":"run","every":"1m",
	 "run":{"servers":["test.example"],"paths":["wwan0"],"patterns":["bulk"],"transports":["tcp"],"size":%d}}]}`, bulk))
	dir := t.TempDir()
	sp, err := upload.OpenSpool(filepath.Join(dir, "spool"), upload.Quota{})
	require.NoError(t, err)
	owner := caps.Defaults()
	owner.Budget = map[string]int64{"wwan0": 5_000_000}
	now := time.Date(2026, 11, 30, 23, 50, 0, 0, time.UTC)
	runs := 0
	var logs bytes.Buffer
	newAgent := func() *Agent {
		return &Agent{URL: f.url, Token: f.tok, Probe: "pi1", Dir: filepath.Join(dir, "state"), Caps: owner, Spool: sp,
			Now: func() time.Time { return now }, Jitter: func(time.Duration) time.Duration { return 0 }, Logger: slogTo(&logs),
			Resolve: func(context.Context, string) ([]netip.Addr, error) { return nil, nil },
			// The result a 2 MB bulk download over wwan0 records: the
			// bytes the interface counted, with protocol overhead.
			Exec: func(_ context.Context, _ api.Task, args []string) error {
				runs++
				e, err := sp.Create(fmt.Sprintf("run-%d", runs), ".json")
				require.NoError(t, err)
				doc, _ := json.Marshal(map[string]any{"records": []any{map[string]any{"type": "pattern_test",
					"path_bytes": []any{map[string]any{"path": "wwan0", "bytes_sent": 40_000, "bytes_received": bulk + 10_000}}}}})
				e.Write(doc)
				require.NoError(t, e.Commit())
				return nil
			},
			Upload: func(context.Context, api.UploadPolicy) error { return nil }}
	}
	a := newAgent()
	ctx := context.Background()
	var ranAt []string
	for i := 0; i < 6; i++ { // 23:50 .. 23:55
		got, err := a.RunOnce(ctx)
		require.NoError(t, err)
		if len(got) > 0 {
			ranAt = append(ranAt, now.Format("15:04"))
		}
		now = now.Add(time.Minute)
		if i == 3 {
			a = newAgent() // a reboot: the count is in the state directory
		}
	}
	assert.Equal(t, []string{"23:50", "23:51"}, ranAt, "two runs (4.1 MB); a third would pass 5 MB")
	assert.Contains(t, logs.String(), "data budget of wwan0: 4.1 MB of 5.0 MB used in 2026-11")
	p := f.probes(t)["pi1"]
	require.Len(t, p.Refusals, 1)
	assert.True(t, p.Refusals[0].Budget)
	assert.Contains(t, p.Refusals[0].Reason, "from 2026-12-01")

	now = time.Date(2026, 12, 1, 0, 0, 30, 0, time.UTC)
	for i := 0; i < 3; i++ {
		got, err := a.RunOnce(ctx)
		require.NoError(t, err)
		if len(got) > 0 {
			ranAt = append(ranAt, now.Format("01-02 15:04"))
		}
		now = now.Add(time.Minute)
	}
	assert.Equal(t, []string{"23:50", "23:51", "12-01 00:00", "12-01 00:01"}, ranAt, "a new month, a new budget")
	p = f.probes(t)["pi1"]
	require.Len(t, p.Refusals, 1, "and the December budget stops it again at 00:02")
	assert.Contains(t, p.Refusals[0].Reason, "4.1 MB of 5.0 MB used in 2026-12")
}

// TestEstimateDefaults: a run task's estimate counts every pattern with
// the run command's defaults (bulk's 10 MB, iperf's 7 s each way at the
// 100 Mbit/s ceiling), so a default run task does not fit a 1 MB budget
// and is skipped, reported as such.
func TestEstimateDefaults(t *testing.T) {
	def := api.Task{Name: "d", Type: api.TypeRun, Run: &api.RunParams{Servers: []string{"s.example"}}}
	perTransport := int64(4*perTest + DefaultPingCount*perPing + DefaultBulkSize + 2*7*IperfCeiling + 2*70*(DefaultChunk+perPing/10))
	assert.Equal(t, DefaultTransports*perTransport, estimate(def))
	assert.Greater(t, estimate(def), int64(1_000_000_000), "about 1.1 GB per path")
	bulk := api.Task{Name: "b", Type: api.TypeRun, Run: &api.RunParams{Servers: []string{"s.example"}, Patterns: []string{"bulk"}, Transports: []string{"tcp"}}}
	assert.Equal(t, int64(perTest+DefaultBulkSize), estimate(bulk), "bulk without size: the default size")
	up := api.Task{Name: "i", Type: api.TypeRun, Run: &api.RunParams{Servers: []string{"s.example"}, Patterns: []string{"iperf"}, Transports: []string{"quic"},
		IperfDirection: "upload", Duration: api.Duration(2 * time.Second)}}
	assert.Equal(t, int64(perTest+2*IperfCeiling), estimate(up))

	c := caps.Defaults()
	c.Budget = map[string]int64{"wwan0": 1_000_000}
	a := &Agent{Caps: c}
	_, why := a.checkBudget(def, budget{Months: map[string]map[string]int64{}}, time.Now())
	assert.Contains(t, why, "data budget of wwan0: 0.0 MB of 1.0 MB used")
	assert.Contains(t, why, "this task needs about 1")
}

// TestUploadPathOwned: a schedule may bind uploads only to the owner's
// upload.path or one of the owner's paths; another (a budgeted path the
// owner spared) is refused, reported, and the upload uses the owner's.
func TestUploadPathOwned(t *testing.T) {
	h := newHostile(t)
	h.schedule = `{"revision":1,"tasks":[],"upload":{"path":"wwan0"}}`
	c := caps.Defaults()
	c.Paths, c.Budget = []string{"wlan0"}, map[string]int64{"wwan0": 1_000_000}
	var paths []string
	a := &Agent{URL: h.url, Token: "t", Probe: "pi1", Dir: t.TempDir(), Caps: c, UploadPath: "wlan0",
		HTTP:  &http.Client{Transport: upload.Transport(&h.pin, nil)},
		Meter: func(names []string) ([]int64, error) { return make([]int64, len(names)), nil },
		Exec:  func(context.Context, api.Task, []string) error { return nil },
		Upload: func(_ context.Context, p api.UploadPolicy) error {
			paths = append(paths, p.Path)
			return nil
		}}
	_, err := a.RunOnce(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{""}, paths, "the owner's upload.path, not wwan0")
	rep := h.lastReport()
	require.Len(t, rep.Refusals, 1)
	assert.Equal(t, "upload", rep.Refusals[0].Task)
	assert.Contains(t, rep.Refusals[0].Reason, "upload.path wwan0 is not one of this probe owner's paths (wlan0)")
	for _, ok := range []string{"", "wlan0"} {
		assert.Empty(t, a.checkUploadPath(ok))
	}
	a.Caps.Paths = nil
	assert.NotEmpty(t, a.checkUploadPath("wwan0"), "no owner's paths: a budgeted path still needs to be the owner's upload.path")
	assert.Empty(t, a.checkUploadPath("eth0"))
}

// TestUploadSpendsBudget: the bytes the budgeted interfaces count while
// the spool is uploaded are spent from their budgets, whichever path the
// upload took.
func TestUploadSpendsBudget(t *testing.T) {
	h := newHostile(t)
	h.schedule = `{"revision":1,"tasks":[]}`
	c := caps.Defaults()
	c.Budget = map[string]int64{"wwan0": 10_000_000, "wlan0": 10_000_000}
	var uploading atomic.Bool
	var wwan0 atomic.Int64
	dir := t.TempDir()
	a := &Agent{URL: h.url, Token: "t", Probe: "pi1", Dir: dir, Caps: c,
		HTTP: &http.Client{Transport: upload.Transport(&h.pin, nil)},
		Meter: func(names []string) ([]int64, error) {
			out := make([]int64, len(names))
			for i, n := range names {
				if n == "wwan0" {
					out[i] = wwan0.Load()
				}
			}
			return out, nil
		},
		Exec: func(context.Context, api.Task, []string) error { return nil },
		Upload: func(context.Context, api.UploadPolicy) error {
			uploading.Store(true)
			wwan0.Add(1_234_567) // the upload went over wwan0
			return nil
		}}
	_, err := a.RunOnce(context.Background())
	require.NoError(t, err)
	require.True(t, uploading.Load())
	b := a.loadBudget()
	assert.Equal(t, map[string]int64{"wwan0": 1_234_567, "wlan0": 0}, b.Months[month(time.Now())])
}
