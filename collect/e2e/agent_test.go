//go:build linux && !race

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/collect/store"
)

// TestAgentOnceEndToEnd: the collector holds a schedule with a pattern
// run against `mptester serve` on loopback; `mptester agent --once` on the
// probe runs it and uploads; the stored run is the probe's spooled result
// and the derived tables hold its tests with their per-path bytes.
func TestAgentOnceEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := newCollector(t, filepath.Join(t.TempDir(), "data"), "")
	// The owner lets this probe measure a server on loopback.
	p := newProbe(t, c, "pi-agent", "agent:\n  allow_private_targets: true\n")

	port := startServe(t)

	sched := fmt.Sprintf(`{"tasks":[{"name":"patterns","command":"run","every":"1h","args":["--server","127.0.0.1:%d","--patterns","ping,bulk","--transports","tcp,quic","--paths","lo","--insecure","--pace","0s","--size","200000"]}]}`, port)
	file := filepath.Join(t.TempDir(), "schedule.json")
	require.NoError(t, os.WriteFile(file, []byte(sched), 0o600))
	b, err := exec.Command(bin, c.args("schedule", "set", "pi-agent", file)...).CombinedOutput()
	require.Error(t, err, "private target before the probe reported its caps")
	assert.Contains(t, string(b), "127.0.0.1")
	c.start()
	// With no schedule yet the agent reports its caps; then the schedule
	// is within them.
	b, _ = exec.Command(bin, "agent", "--once", "--config", p.config).CombinedOutput()
	assert.Contains(t, string(b), "no schedule yet")
	c.kill()
	b, err = exec.Command(bin, c.args("schedule", "set", "pi-agent", file)...).CombinedOutput()
	require.NoError(t, err, "%s", b)
	c.start()

	// Keep a copy of what the probe spools: the agent deletes it once receipted.
	b, err = exec.Command(bin, "agent", "--once", "--config", p.config).CombinedOutput()
	require.NoError(t, err, "%s", b)
	assert.Contains(t, string(b), "ran 1 tasks")
	assert.Contains(t, string(b), "schedule changed")
	n, _ := pending(t, p.spool)
	assert.Zero(t, n, "uploaded")
	b, err = exec.Command(bin, "agent", "--once", "--config", p.config).CombinedOutput()
	require.NoError(t, err, "%s", b)
	assert.Contains(t, string(b), "ran 0 tasks", "not due again within the hour")
	c.kill()

	got := stored(t, c)
	require.Len(t, got, 1)
	var doc struct {
		RunID   string            `json:"run_id"`
		Command string            `json:"command"`
		Records []json.RawMessage `json:"records"`
	}
	for _, raw := range got {
		require.NoError(t, json.Unmarshal(raw, &doc))
	}
	assert.Equal(t, "run", doc.Command)
	// The derived rows equal what the probe's own document says.
	st, err := store.Open(context.Background(), filepath.Join(c.data, "collect.db"))
	require.NoError(t, err)
	defer st.Close()
	raw := got[doc.RunID]
	want, err := collect.Derive(bytesReader(raw), "application/json")
	require.NoError(t, err)
	require.Len(t, want.Tests, 4, "ping and bulk over tcp and quic")
	for _, tt := range want.Tests {
		assert.Equal(t, "lo", tt.Path)
		if tt.Status == "success" && tt.Pattern == "bulk" {
			require.NotEmpty(t, tt.PathBytes)
			assert.Greater(t, tt.PathBytes[0].Received, int64(200000), "bulk bytes counted on lo")
		}
	}
	// Derived at ingest by the (killed) server, or rebuilt now by reindex.
	b, err = exec.Command(bin, c.args("reindex")...).CombinedOutput()
	require.NoError(t, err, "%s", b)
	d, err := st.GetDerived(context.Background(), doc.RunID)
	require.NoError(t, err)
	assert.Equal(t, want, d)
}
