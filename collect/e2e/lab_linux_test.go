//go:build linux && !race

package e2e

import (
	"context"
	"encoding/json"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/labtest"
	"github.com/mptester/mptester/lab/world"
)

// TestLabAgentEndToEnd: the collector runs in the lab's Internet
// namespace; the lab probe runs `mptester agent --once` with a schedule of
// a survey and a pattern run (against `mptester serve` in the Internet
// namespace). The server's raw runs equal the probe's own output files,
// its derived tables equal what those files say, and the survey cells
// equal the lab's ground truth (targets and responsive counts exactly,
// RTT p50 within 2 ms).
func TestLabAgentEndToEnd(t *testing.T) {
	l := labtest.Start(t, lab.Options{Domains: 40, WorldSeed: 7})
	info := l.Config()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	c := newCollector(t, filepath.Join(t.TempDir(), "data"), "")
	c.addr = lab.Server4.String() + ":8080"
	c.url = "https://" + c.addr
	c.command = func(args ...string) *exec.Cmd {
		cmd, err := l.Command(ctx, "server", append([]string{bin}, args...)...)
		require.NoError(t, err)
		return cmd
	}
	srv, err := l.Command(ctx, "server", bin, "serve", "--listen", lab.Server4.String(), "--tcp-port", "8443", "--quic-port", "8443", "--log-level", "warn")
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })

	// The lab's Internet lives in reserved ranges: its owner allows them.
	p := newProbe(t, c, info.ProbeID(), "agent:\n  max_rate: 1000\n  allow_private_targets: true\n")
	base, err := os.ReadFile(info.Files.Config)
	require.NoError(t, err)
	own, err := os.ReadFile(p.config)
	require.NoError(t, err)
	merged := regexp.MustCompile(`(?m)^probe_id:.*\n`).ReplaceAllString(string(base), "") + string(own)
	require.NoError(t, os.WriteFile(p.config, []byte(merged), 0o600))

	// The survey's domains travel in the task (the agent writes its list).
	tranco, err := os.ReadFile(info.Files.Tranco)
	require.NoError(t, err)
	var domains []string
	for _, line := range strings.Split(strings.TrimSpace(string(tranco)), "\n") {
		_, d, _ := strings.Cut(strings.TrimSpace(line), ",")
		domains = append(domains, d)
	}
	require.Len(t, domains, info.Domains)
	sched := map[string]any{"tasks": []map[string]any{
		{"name": "survey", "type": "survey", "every": "1h", "survey": map[string]any{"domains": domains,
			"paths": []string{"wlan0", "wwan0"}, "count": 3, "timeout": "800ms", "spacing": "10ms", "rate": 500,
			"dns_timeout": "700ms", "dns_retries": 1}},
		{"name": "patterns", "type": "run", "every": "1h", "run": map[string]any{"servers": []string{lab.Server4.String()},
			"ports": map[string]int{"tcp": 8443, "quic": 8443}, "quic_alt_port": 0, "insecure": true, "paths": []string{"wlan0", "wwan0"},
			"patterns": []string{"ping", "bulk"}, "transports": []string{"tcp", "quic"}, "size": 500000, "ping_count": 5, "pace": "50ms"}},
	}}
	b, _ := json.Marshal(sched)
	file := filepath.Join(t.TempDir(), "schedule.json")
	require.NoError(t, os.WriteFile(file, b, 0o600))
	// The collector checks a schedule against the caps the probe reported
	// (an agent with no schedule yet reports them).
	c.start()
	first, err := l.Command(ctx, "client", bin, "--config", p.config, "agent", "--once")
	require.NoError(t, err)
	out, _ := first.CombinedOutput()
	require.Contains(t, string(out), "no schedule yet")
	c.kill()
	out, err = exec.Command(bin, c.args("schedule", "set", info.ProbeID(), file)...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	c.start()

	agent, err := l.Command(ctx, "client", bin, "--config", p.config, "agent", "--once")
	require.NoError(t, err)
	out, err = agent.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "ran 2 tasks")
	n, rej := pending(t, p.spool)
	require.Zero(t, n, "%s", out)
	require.Zero(t, rej)
	c.kill()

	got := stored(t, c)
	require.Len(t, got, 2)
	files := got // the probe's results as stored (the agent spooled them)
	require.NotEmpty(t, surveyID(files), "a survey and a pattern run")

	// Derived rows: rebuilt from raw, equal to what the probe's files say.
	out, err = exec.Command(bin, c.args("reindex")...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	idx, err := store.Open(ctx, filepath.Join(c.data, "collect.db"))
	require.NoError(t, err)
	defer idx.Close()
	var cells []store.SurveyCell
	for id, b := range files {
		ct := "application/x-ndjson"
		if strings.HasSuffix(string(b[:1]), "{") && !strings.HasPrefix(string(b), `{"type"`) {
			ct = "application/json"
		}
		want, err := collect.Derive(strings.NewReader(string(b)), ct)
		require.NoError(t, err)
		want = want.Stored()
		d, err := idx.GetDerived(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, want.Tests, d.Tests)
		assert.Equal(t, want.Probes, d.Probes)
		assert.ElementsMatch(t, want.Cells, d.Cells)
		if len(d.Cells) > 0 {
			cells = d.Cells
		}
		if len(d.Tests) > 0 {
			assert.Len(t, d.Tests, 2*2*2, "ping and bulk over tcp and quic on two paths")
			t.Logf("run: %d pattern tests, first %s/%s over %s: %s, path bytes %+v", len(d.Tests), d.Tests[0].Pattern, d.Tests[0].Transport, d.Tests[0].Path, d.Tests[0].Status, d.Tests[0].PathBytes)
		}
	}

	t.Logf("stored: survey %d bytes, %d cells", len(files[surveyID(files)]), len(cells))

	// Survey cells against the lab's ground truth.
	var truth world.Truth
	l.Truth(t, &truth)
	require.NotEmpty(t, truth.Summary.Cells)
	require.Len(t, cells, len(truth.Summary.Cells))
	for _, w := range truth.Summary.Cells {
		found := false
		for _, g := range cells {
			if g.ProbePath != w.ProbePath || g.ResolvePath != w.ResolvePath {
				continue
			}
			found = true
			assert.Equal(t, int64(w.Targets), g.Targets, "%s/%s targets", w.ProbePath, w.ResolvePath)
			assert.Equal(t, int64(w.Responsive), g.Responsive, "%s/%s responsive", w.ProbePath, w.ResolvePath)
			assert.Equal(t, int64(w.Unresponsive), g.Unresponsive, "%s/%s unresponsive", w.ProbePath, w.ResolvePath)
			assert.LessOrEqual(t, math.Abs(g.RTTP50ms-w.RTTms.P50), 2.0, "%s/%s RTT p50 %v vs truth %v", w.ProbePath, w.ResolvePath, g.RTTP50ms, w.RTTms.P50)
			t.Logf("cell %s/%s: targets %d, responsive %d, RTT p50 %.2f ms (truth %.2f)", g.ProbePath, g.ResolvePath, g.Targets, g.Responsive, g.RTTP50ms, w.RTTms.P50)
		}
		assert.True(t, found, "cell %s/%s in the derived table", w.ProbePath, w.ResolvePath)
	}
}

func surveyID(files map[string][]byte) string {
	for id, b := range files {
		if strings.HasPrefix(string(b), `{"type":"header"`) {
			return id
		}
	}
	return ""
}

// TestLabAgentNoPrivateTargets: a lab probe whose owner set no agent:
// section (private targets never). A schedule asking it to survey its own
// LAN side (the gateways, its own addresses, other hosts there) is refused
// by the collector, and by the agent when injected into its cached copy;
// a survey of world names, some of which resolve to private addresses,
// runs but probes none of those. The emulator blocks and counts every
// packet to the LAN sides and the private world: it counts none.
func TestLabAgentNoPrivateTargets(t *testing.T) {
	l := labtest.Start(t, lab.Options{Domains: 40, WorldSeed: 7})
	info := l.Config()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	watched := []netip.Prefix{netip.MustParsePrefix("198.18.1.0/24"), netip.MustParsePrefix("198.18.2.0/24"),
		netip.MustParsePrefix("fd00:1::/64"), netip.MustParsePrefix("fd00:2::/64")}
	watched = append(watched, lab.PrivatePrefixes...)
	for _, name := range []string{"wlan0", "wwan0"} {
		for _, p := range watched {
			l.Lab.Link(name).Block(p)
		}
	}
	sent := func() (n uint64) {
		for _, name := range []string{"wlan0", "wwan0"} {
			n += l.Lab.Link(name).Stats().Up.DropBlock
		}
		return n
	}

	c := newCollector(t, filepath.Join(t.TempDir(), "data"), "")
	c.addr = lab.Server4.String() + ":8080"
	c.url = "https://" + c.addr
	c.command = func(args ...string) *exec.Cmd {
		cmd, err := l.Command(ctx, "server", append([]string{bin}, args...)...)
		require.NoError(t, err)
		return cmd
	}
	p := newProbe(t, c, info.ProbeID(), "")
	base, err := os.ReadFile(info.Files.Config)
	require.NoError(t, err)
	own, err := os.ReadFile(p.config)
	require.NoError(t, err)
	merged := regexp.MustCompile(`(?m)^probe_id:.*\n`).ReplaceAllString(string(base), "") + string(own)
	require.NoError(t, os.WriteFile(p.config, []byte(merged), 0o600))
	agentOnce := func() string {
		cmd, err := l.Command(ctx, "client", bin, "--config", p.config, "agent", "--once")
		require.NoError(t, err)
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	set := func(sched string) (string, error) {
		file := filepath.Join(t.TempDir(), "schedule.json")
		require.NoError(t, os.WriteFile(file, []byte(sched), 0o600))
		out, err := exec.Command(bin, c.args("schedule", "set", info.ProbeID(), file)...).CombinedOutput()
		return string(out), err
	}

	// The world's names: some resolve to private addresses on one path.
	var truth world.Truth
	l.Truth(t, &truth)
	var names []string
	private := 0
	for _, d := range truth.Domains {
		names = append(names, d.Name)
		for _, r := range d.Paths {
			for _, a := range r.Addrs {
				for _, pfx := range lab.PrivatePrefixes {
					if pfx.Contains(a) {
						private++
					}
				}
			}
		}
	}
	require.NotZero(t, private, "the world has names with private addresses")
	worldSched, _ := json.Marshal(map[string]any{"tasks": []map[string]any{{"name": "world", "type": "survey", "every": "1h",
		"survey": map[string]any{"domains": names, "paths": []string{"wlan0", "wwan0"}, "count": 2, "timeout": "800ms",
			"spacing": "10ms", "rate": 200, "dns_timeout": "700ms", "dns_retries": 1}}}})

	c.start()
	assert.Contains(t, agentOnce(), "no schedule yet") // reports its caps
	c.kill()
	out, err := set(string(worldSched))
	require.NoError(t, err, out)
	c.start()
	out = agentOnce()
	require.Contains(t, out, "ran 1 tasks", out)
	assert.Zero(t, sent(), "no packet to a private or LAN-side address")
	got := stored(t, c)
	require.Len(t, got, 1)
	var skipped, responsive int
	for _, raw := range got {
		for _, line := range strings.Split(string(raw), "\n") {
			var sum struct {
				Type    string `json:"type"`
				Skipped []struct {
					Reason string `json:"reason"`
					Count  int    `json:"count"`
				} `json:"skipped"`
				Cells []struct {
					Responsive int `json:"responsive"`
				} `json:"cells"`
			}
			if json.Unmarshal([]byte(line), &sum) != nil || sum.Type != "summary" {
				continue
			}
			for _, s := range sum.Skipped {
				if s.Reason == "private" {
					skipped += s.Count
				}
			}
			for _, c := range sum.Cells {
				responsive += c.Responsive
			}
		}
	}
	assert.NotZero(t, skipped, "the private addresses were skipped, and said so")
	assert.NotZero(t, responsive, "the public world was surveyed")
	t.Logf("world survey: %d private addresses in the truth, %d skipped as private, %d responsive targets", private, skipped, responsive)

	// The probe's own LAN side, by address: refused at the collector...
	lanSched := `{"tasks":[{"name":"lan","type":"survey","every":"1h","survey":{"domains":["198.18.1.1","198.18.2.1","198.18.1.2","198.18.1.77"],"paths":["wlan0","wwan0"]}}]}`
	c.kill()
	out, err = set(lanSched)
	require.Error(t, err)
	assert.Contains(t, out, "198.18.1.1")
	// ... and by the agent when injected into its cached copy.
	cache := filepath.Join(p.spool+"-agent", "schedule.json")
	b, err := os.ReadFile(cache)
	require.NoError(t, err)
	var cached struct {
		ETag     string          `json:"etag"`
		Schedule json.RawMessage `json:"schedule"`
	}
	require.NoError(t, json.Unmarshal(b, &cached))
	cached.Schedule = json.RawMessage(`{"revision":1,` + lanSched[1:])
	b, _ = json.Marshal(cached)
	require.NoError(t, os.WriteFile(cache, b, 0o600))
	state := filepath.Join(p.spool+"-agent", "state.json")
	require.NoError(t, os.Remove(state)) // due at once
	c.start()
	out = agentOnce()
	assert.Contains(t, out, "ran 0 tasks", out)
	assert.Contains(t, out, "task refused")
	assert.Zero(t, sent(), "no packet to a private or LAN-side address")
	c.kill()
	out2, err := exec.Command(bin, c.args("probe", "list")...).CombinedOutput()
	require.NoError(t, err, "%s", out2)
	assert.Contains(t, string(out2), `"task": "lan"`, "the refusal is in the collector's probe list")
	assert.Contains(t, string(out2), "198.18.1.1")
}
