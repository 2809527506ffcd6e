//go:build linux && !race

package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/fleetfig"
	"github.com/mptester/mptester/internal/promtest"
)

// runFigureLines are a page's lines for the probe's last pattern run:
// its time, tests and goodputs, sorted.
func runFigureLines(page, probe string) []string {
	var out []string
	for _, l := range strings.Split(page, "\n") {
		for _, n := range []string{fleetfig.RunTime, fleetfig.RunTests, fleetfig.RunGoodput} {
			if strings.HasPrefix(l, n+"{") && strings.Contains(l, `probe="`+probe+`"`) {
				out = append(out, l)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestAgentTextfileInPrometheus: the real `mptester agent --once
// --textfile DIR` runs its collector's schedule (ping and bulk over tcp
// and quic against `mptester serve` on loopback) and writes DIR/mptester.prom;
// its run figures (tests by status, goodput per transport) are the
// collector's /metrics/fleet figures for the same upload, line for line;
// Debian's Prometheus scrapes the collector and Debian's node_exporter
// reading the file, and every query of the shipped dashboard over those
// metrics returns the collector's and the file's values.
func TestAgentTextfileInPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	if !promtest.Need(t) {
		return
	}
	c := newCollector(t, filepath.Join(t.TempDir(), "data"), "")
	p := newProbe(t, c, "pi-prom", "agent:\n  allow_private_targets: true\n")
	out, err := exec.Command(bin, c.args("admin", "add", "ops")...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	admin := regexp.MustCompile(`[0-9a-f]{64}`).Find(out)
	require.NotNil(t, admin, "%s", out)

	port := startServe(t)
	sched := fmt.Sprintf(`{"tasks":[{"name":"patterns","command":"run","every":"1h","args":["--server","127.0.0.1:%d","--patterns","ping,bulk","--transports","tcp,quic","--paths","lo","--insecure","--pace","0s","--size","400000"]}]}`, port)
	file := filepath.Join(t.TempDir(), "schedule.json")
	require.NoError(t, os.WriteFile(file, []byte(sched), 0o600))
	// The probe reports its caps first; then the private target is within them.
	c.start()
	b, _ := exec.Command(bin, "agent", "--once", "--config", p.config).CombinedOutput()
	assert.Contains(t, string(b), "no schedule yet")
	c.kill()
	b, err = exec.Command(bin, c.args("schedule", "set", "pi-prom", file)...).CombinedOutput()
	require.NoError(t, err, "%s", b)
	c.start()

	tdir := t.TempDir()
	b, err = exec.Command(bin, "agent", "--once", "--config", p.config, "--textfile", tdir).CombinedOutput()
	require.NoError(t, err, "%s", b)
	require.Contains(t, string(b), "ran 1 tasks")
	tf, err := os.ReadFile(filepath.Join(tdir, "mptester.prom"))
	require.NoError(t, err, "%s", b)

	req, err := http.NewRequest(http.MethodGet, c.url+"/metrics/fleet", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+string(admin))
	resp, err := c.client(t, 1).Do(req)
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", page)

	lines := runFigureLines(string(tf), "pi-prom")
	assert.Equal(t, runFigureLines(string(page), "pi-prom"), lines, "the probe's textfile and the collector disagree")
	goodputs := 0
	for _, l := range lines {
		if strings.HasPrefix(l, fleetfig.RunGoodput+`{probe="pi-prom",transport="`) && strings.Contains(l, `pattern="bulk",direction="download"`) {
			goodputs++
		}
	}
	require.Equal(t, 2, goodputs, "a bulk goodput for tcp and for quic:\n%s", tf)

	// Prometheus scrapes the collector and node_exporter over the
	// textfile at once; the probe's own figures are told apart by a
	// relabelled probe name (the file's and the collector's are the same
	// probe).
	want := map[string]float64{}
	promtest.Parse(t, page, want)
	promtest.Parse(t, bytes.ReplaceAll(tf, []byte(`probe="pi-prom"`), []byte(`probe="pi-prom-textfile"`)), want)
	tok := filepath.Join(t.TempDir(), "admin.token")
	require.NoError(t, os.WriteFile(tok, admin, 0o600))
	node := promtest.NodeExporter(t, tdir)
	prom := promtest.Prometheus(t, fmt.Sprintf(`  - job_name: mptester-fleet
    scheme: https
    metrics_path: /metrics/fleet
    authorization: {credentials_file: %s}
    tls_config: {insecure_skip_verify: true}
    static_configs: [{targets: ["%s"]}]
  - job_name: node
    static_configs: [{targets: ["127.0.0.1:%d"]}]
    metric_relabel_configs:
      - {source_labels: [probe], regex: pi-prom, target_label: probe, replacement: pi-prom-textfile}
`, tok, c.addr, node))
	dash := promtest.LoadDashboard(t, "../../packaging/grafana/mptester-fleet.json")
	// Neither has a survey or a mobile run: those panels have nothing to
	// show here (TestDashboardQueries checks them with planted runs).
	checked := dash.Check(t, prom, want, true)
	assert.Equal(t, 4, checked, "last seen, spool backlog, tests and goodput")
}
