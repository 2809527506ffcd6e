//go:build linux && !race

package cmd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/internal/nstest"
	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/labtest"
)

// unitCaps reads a shipped unit's capabilities (AmbientCapabilities=, which
// must equal CapabilityBoundingSet=) as setpriv names them ("net_raw"): the
// test grants exactly what the unit does, so the two cannot drift apart.
func unitCaps(t *testing.T, unit string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "packaging", "systemd", unit))
	require.NoError(t, err)
	get := func(key string) []string {
		m := regexp.MustCompile(`(?m)^` + key + `=(.*)$`).FindSubmatch(b)
		require.NotNil(t, m, "%s: no %s=", unit, key)
		var caps []string
		for _, c := range strings.Fields(string(m[1])) {
			caps = append(caps, strings.ToLower(strings.TrimPrefix(c, "CAP_")))
		}
		slices.Sort(caps)
		return caps
	}
	amb := get("AmbientCapabilities")
	require.Equal(t, get("CapabilityBoundingSet"), amb, "%s: ambient and bounding sets differ", unit)
	return amb
}

// privLab runs the mptester binary in a lab namespace as an unprivileged
// user (nobody) holding only the given capabilities: inheritable,
// ambient and bounding set, no new privileges, as the units do.
type privLab struct {
	t    *testing.T
	info lab.Info
	bin  string
	home string
}

func (p *privLab) command(ctx context.Context, side string, caps []string, args ...string) *exec.Cmd {
	set := "-all"
	for _, c := range caps {
		set += ",+" + c
	}
	argv := append([]string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--no-new-privs",
		"--inh-caps=" + set, "--ambient-caps=" + set, "--bounding-set=" + set, "--", p.bin}, args...)
	cmd, err := lab.Command(ctx, p.info, side, argv...)
	require.NoError(p.t, err)
	cmd.Env = append(cmd.Env, "HOME="+p.home, "XDG_CACHE_HOME="+filepath.Join(p.home, "cache"))
	return cmd
}

// run returns the exit code and the combined output.
func (p *privLab) run(caps []string, args ...string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := p.command(ctx, "client", caps, args...).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	}
	require.NoError(p.t, err, "%s", out)
	return 0, string(out)
}

// TestLabLeastPrivilege runs the agent's measurements and the test server
// as nobody with exactly their units' capabilities: each passes. With a
// capability removed a command that needs it fails before writing any
// output, exit 5, naming the capability; one that needs none still passes.
func TestLabLeastPrivilege(t *testing.T) {
	labtest.Require(t)
	if _, err := exec.LookPath("setpriv"); err != nil {
		nstest.SkipUnless(t, "setpriv not found: apt-get install util-linux")
	}
	agentCaps, serveCaps := unitCaps(t, "mptester-agent.service"), unitCaps(t, "mptester-serve.service")
	require.Equal(t, []string{"net_raw"}, agentCaps, "the agent's capabilities this test knows the needs of")
	require.Equal(t, []string{"net_bind_service"}, serveCaps)

	// Everything nobody reads or writes is world-accessible: the binary,
	// the lab's config and list, the outputs.
	dir, err := os.MkdirTemp("", "mptpriv")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	labDir, out, home := filepath.Join(dir, "lab"), filepath.Join(dir, "out"), filepath.Join(dir, "home")
	for _, d := range []string{labDir, out, home} {
		require.NoError(t, os.Mkdir(d, 0o777))
		require.NoError(t, os.Chmod(d, 0o777))
	}
	bin := filepath.Join(dir, "mptester")
	b, err := exec.Command("go", "build", "-o", bin, "../../cmd/mptester").CombinedOutput()
	require.NoError(t, err, "build mptester: %s", b)
	l := labtest.Start(t, lab.Options{Domains: 20, Seed: 7, CellBackup: true, Dir: labDir})
	require.NoError(t, filepath.Walk(labDir, func(path string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			err = os.Chmod(path, 0o644)
		}
		return err
	}))
	p := &privLab{t: t, info: l.Config(), bin: bin, home: home}
	exists := func(f string) bool { _, err := os.Stat(f); return err == nil }

	// serve: binding a port below 1024 (853: the lab's own servers hold
	// 443) needs CAP_NET_BIND_SERVICE, nothing else.
	serveArgs := []string{"serve", "--tcp-port", "853", "--quic-port", "853", "--mpquic-port", "0", "--state", filepath.Join(out, "serve-state")}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err = p.command(ctx, "internet", nil, serveArgs...).CombinedOutput()
	assertMissingCap(t, err, string(b), "CAP_NET_BIND_SERVICE")
	fp, stop := p.startServe(serveCaps, serveArgs)

	// run over MPTCP and QUIC (paths bound with SO_BINDTODEVICE, the
	// MPTCP endpoints read): no capability needed, with or without the
	// agent's.
	for _, caps := range [][]string{agentCaps, nil} {
		res := filepath.Join(out, fmt.Sprintf("run-%d.json", len(caps)))
		code, o := p.run(caps, "run", "--server", lab.Server4.String(), "--tcp-port", "853", "--quic-port", "853", "--pin", fp, "--transports", "mptcp,quic",
			"--patterns", "ping", "--no-upload", "--log-level", "warn", "-o", res)
		require.Equal(t, cmdutil.ExitOK, code, "run with caps %v: %s", caps, o)
		var doc struct {
			Status  string `json:"status"`
			Records []struct {
				Status string `json:"status"`
				Config struct {
					Transport string `json:"transport"`
				} `json:"config"`
			} `json:"records"`
		}
		readJSON(t, res, &doc)
		assert.Equal(t, "ok", doc.Status, "run with caps %v", caps)
		ok := map[string]bool{}
		for _, r := range doc.Records {
			assert.Equal(t, "success", r.Status, "run with caps %v: %s", caps, r.Config.Transport)
			ok[r.Config.Transport] = true
		}
		assert.Equal(t, map[string]bool{"mptcp": true, "quic": true}, ok, "run with caps %v: tests per transport", caps)
	}

	// Mobile mode's AF_PACKET capture needs CAP_NET_RAW.
	mobile := func(caps []string, res string) (int, string) {
		return p.run(caps, "run", "--mode", "mobile", "--server", lab.Server4.String(), "--tcp-port", "853", "--quic-port", "853", "--pin", fp, "--transports", "mptcp",
			"--paths", "wlan0,wwan0", "--backup", "wwan0", "--duration", "3s", "--grace", "2s", "--no-upload", "--log-level", "warn", "-o", res)
	}
	res := filepath.Join(out, "mobile.json")
	code, o := mobile(agentCaps, res)
	require.Equal(t, cmdutil.ExitOK, code, "mobile: %s", o)
	var mob struct {
		Status  string `json:"status"`
		Records []struct {
			Capture []struct {
				Iface   string `json:"iface"`
				Matched int    `json:"matched"`
			} `json:"capture"`
		} `json:"records"`
	}
	readJSON(t, res, &mob)
	assert.Equal(t, "ok", mob.Status)
	captured := map[string]int{}
	for _, r := range mob.Records {
		for _, c := range r.Capture {
			captured[c.Iface] += c.Matched
		}
	}
	assert.Positive(t, captured["wlan0"], "mobile: the capture saw the test flow on wlan0: %v", captured)
	for _, without := range agentCaps {
		res := filepath.Join(out, "mobile-without-"+without+".json")
		code, o := mobile(remove(agentCaps, without), res)
		assert.Equal(t, cmdutil.ExitPermission, code, "mobile without %s: %s", without, o)
		assert.Contains(t, o, "CAP_NET_RAW", "mobile without %s", without)
		assert.False(t, exists(res), "mobile without %s: no output", without)
	}

	// Surveys with raw sockets: tcp-syn and icmp.
	for _, method := range []string{"tcp-syn", "icmp"} {
		res := filepath.Join(out, "survey-"+method+".jsonl")
		survey := func(caps []string, res string) (int, string) {
			return p.run(caps, "survey", "--method", method, "--top", "6", "--count", "3", "--no-upload", "--log-level", "warn", "-o", res)
		}
		code, o := survey(agentCaps, res)
		// 3: targets the overloaded host could not measure cleanly
		// (partial, said so); never a permission failure.
		require.Contains(t, []int{cmdutil.ExitOK, cmdutil.ExitPartial}, code, "survey %s: %s", method, o)
		probes, responsive := 0, 0
		f, err := os.Open(res)
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var rec struct {
				Type       string         `json:"type"`
				Errors     map[string]int `json:"errors"`
				Responsive bool           `json:"responsive"`
				Sent       int            `json:"sent"`
			}
			require.NoError(t, json.Unmarshal(sc.Bytes(), &rec))
			if rec.Type != "probe" {
				continue
			}
			probes++
			assert.Empty(t, rec.Errors, "survey %s: probe errors", method)
			assert.Positive(t, rec.Sent, "survey %s: nothing sent", method)
			if rec.Responsive {
				responsive++
			}
		}
		f.Close()
		assert.Positive(t, probes, "survey %s: probe records", method)
		assert.Positive(t, responsive, "survey %s: responsive targets", method)
		for _, without := range agentCaps {
			res := filepath.Join(out, "survey-"+method+"-without-"+without+".jsonl")
			code, o := survey(remove(agentCaps, without), res)
			assert.Equal(t, cmdutil.ExitPermission, code, "survey %s without %s: %s", method, without, o)
			assert.Contains(t, o, "CAP_NET_RAW", "survey %s without %s", method, without)
			assert.False(t, exists(res), "survey %s without %s: no output", method, without)
		}
	}

	// SIGTERM: serve drains and exits 0; restarted, it presents the
	// certificate kept in --state (the pinned fingerprint holds).
	stop()
	fp2, stop2 := p.startServe(serveCaps, serveArgs)
	assert.Equal(t, fp, fp2, "restarted serve keeps its fingerprint")
	stop2()
}

// startServe starts serve in the internet namespace and waits for its
// fingerprint; stop sends SIGTERM and requires exit 0.
func (p *privLab) startServe(caps, args []string) (string, func()) {
	t := p.t
	cmd := p.command(context.Background(), "internet", caps, args...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	fpc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		re := regexp.MustCompile(`fingerprint: (\S+)`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				fpc <- m[1]
			}
		}
		done <- cmd.Wait()
	}()
	var fp string
	select {
	case fp = <-fpc:
	case err := <-done:
		t.Fatalf("serve with caps %v: %v: %s", caps, err, stderr.String())
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("serve did not start: %s", stderr.String())
	}
	// The listeners are up once the fingerprint and addresses are out.
	time.Sleep(200 * time.Millisecond)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			cmd.Process.Kill()
			<-done
		}
	})
	return fp, func() {
		stopped = true
		// ip netns exec runs setpriv, which execs mptester: the same pid.
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		select {
		case err := <-done:
			require.NoError(t, err, "serve exit after SIGTERM: %s", stderr.String())
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			t.Fatal("serve did not stop on SIGTERM")
		}
	}
}

func assertMissingCap(t *testing.T, err error, out, capability string) {
	t.Helper()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "%s", out)
	assert.Equal(t, cmdutil.ExitPermission, ee.ExitCode(), "%s", out)
	assert.Contains(t, out, capability)
}

func remove(caps []string, c string) []string {
	return slices.DeleteFunc(slices.Clone(caps), func(x string) bool { return x == c })
}

func readJSON(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, v), "%s", file)
}
