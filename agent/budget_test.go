package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
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
