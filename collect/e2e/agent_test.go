//go:build linux && !race

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	assert.Equal(t, want.Stored(), d)
}

// TestAgentHostileCache: the real `mptester agent --once`, its cached
// schedule replaced by hostile ones (as a compromised collector or a local
// attacker with the state directory would): nothing runs, no file in the
// probe's tree outside its spool and state directory changes (no
// /tmp/pwned.json either), and each refusal reaches the collector's probe
// list with the next upload.
func TestAgentHostileCache(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := newCollector(t, filepath.Join(t.TempDir(), "data"), "")
	p := newProbe(t, c, "pi-hostile", "")
	require.NoError(t, os.WriteFile(filepath.Join(p.dir, "secrets.csv"), []byte("1,secret.example\n"), 0o600))
	c.start()
	b, _ := exec.Command(bin, "agent", "--once", "--config", p.config).CombinedOutput()
	require.Contains(t, string(b), "no schedule yet")
	c.kill()
	good := filepath.Join(t.TempDir(), "good.json")
	require.NoError(t, os.WriteFile(good, []byte(`{"tasks":[{"name":"later","type":"survey","every":"24h","windows":["00:00-00:01"],"survey":{"top":1}}]}`), 0o600))
	b, err := exec.Command(bin, c.args("schedule", "set", "pi-hostile", good)...).CombinedOutput()
	require.NoError(t, err, "%s", b)
	c.start()
	b, err = exec.Command(bin, "agent", "--once", "--config", p.config).CombinedOutput()
	require.NoError(t, err, "%s", b)

	state := p.spool + "-agent"
	cache := filepath.Join(state, "schedule.json")
	var cached struct {
		ETag     string          `json:"etag"`
		Schedule json.RawMessage `json:"schedule"`
	}
	raw, err := os.ReadFile(cache)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &cached))
	pwned := filepath.Join(os.TempDir(), fmt.Sprintf("pwned-%d.json", os.Getpid()))
	for name, task := range map[string]string{
		"output":     `{"name":"x","command":"run","every":"1m","args":["--server","127.0.0.1:1","--patterns","ping","--transports","tcp","--paths","lo","-o","` + pwned + `"]}`,
		"memprofile": `{"name":"x","command":"survey","every":"1m","args":["--list","` + filepath.Join(p.dir, "secrets.csv") + `","--memprofile","` + pwned + `"]}`,
		"config":     `{"name":"x","command":"run","every":"1m","args":["--config","` + p.config + `","--server","127.0.0.1:1"]}`,
		"private":    `{"name":"x","type":"run","every":"1m","run":{"servers":["127.0.0.1:1"],"patterns":["ping"],"transports":["tcp"],"paths":["lo"]}}`,
		"rate":       `{"name":"x","type":"survey","every":"1m","survey":{"domains":["a.example"],"rate":100000}}`,
	} {
		t.Run(name, func(t *testing.T) {
			cached.Schedule = json.RawMessage(`{"revision":1,"tasks":[` + task + `]}`)
			b, _ := json.Marshal(cached)
			require.NoError(t, os.WriteFile(cache, b, 0o600))
			before := treeHashes(t, p.dir, state, p.spool)
			out, err := exec.Command(bin, "agent", "--once", "--config", p.config).CombinedOutput()
			require.NoError(t, err, "%s", out)
			assert.Contains(t, string(out), "ran 0 tasks")
			assert.Contains(t, string(out), "task refused")
			assert.Equal(t, before, treeHashes(t, p.dir, state, p.spool), "only the spool and state directory changed")
			_, err = os.Stat(pwned)
			assert.True(t, os.IsNotExist(err), "no %s", pwned)
			list, err := exec.Command(bin, c.args("probe", "list")...).CombinedOutput()
			require.NoError(t, err, "%s", list)
			var ps []struct {
				Name     string `json:"name"`
				Refusals []struct {
					Task, Reason string
				} `json:"refusals"`
			}
			require.NoError(t, json.Unmarshal(list, &ps), "%s", list)
			require.Len(t, ps, 1)
			require.Len(t, ps[0].Refusals, 1, "the refusal is in the probe list")
			assert.Equal(t, "x", ps[0].Refusals[0].Task)
		})
	}
	c.kill()
}

// treeHashes hashes every file under root except the skipped directories.
func treeHashes(t *testing.T, root string, skip ...string) map[string]string {
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if slices.Contains(skip, p) {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			out[p] = hex.EncodeToString(sum[:])
		}
		return nil
	}))
	return out
}
