package lab_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/labtest"
	"github.com/mptester/mptester/patterns/transport"
)

func uniqueName() string { return fmt.Sprintf("c%d-%d", os.Getpid(), time.Now().UnixNano()%100000) }

func shortDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "mptlabcmd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// alive: the daemon is our child here, so a dead one may linger as a
// zombie until the Wait in `lab up` reaps it.
func alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil && !zombie(pid) }

func up(t *testing.T, name, dir string) lab.Info {
	t.Helper()
	code, out, stderr := run(t, "lab", "up", "--name", name, "--dir", dir, "--domains", "20", "--wlan0", "delay=5ms")
	if code != 0 {
		t.Fatalf("lab up: exit %d: %s", code, stderr)
	}
	var info lab.Info
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("lab up printed no lab.json: %v\n%s", err, out)
	}
	if info.Name != name || info.Namespaces.Client != lab.ClientNS(name) || !alive(info.PID) {
		t.Fatalf("lab up: info %+v (daemon alive: %v)", info, alive(info.PID))
	}
	return info
}

// TestLabLifecycle drives the real daemon: up, status, set, exec, down,
// then a killed daemon followed by a new up, and checks nothing is left.
func TestLabLifecycle(t *testing.T) {
	labtest.Require(t)
	t.Setenv(envMain, "1")
	name, dir := uniqueName(), shortDir(t)
	t.Cleanup(func() { _ = lab.CleanStale(context.Background(), name, dir) })

	info := up(t, name, dir)
	if left := lab.Leftovers(name, dir); len(left) == 0 {
		t.Fatal("lab up: Leftovers sees nothing of a running lab (the check itself is broken)")
	}
	if code, _, stderr := run(t, "lab", "up", "--name", name, "--dir", dir); code == 0 || !strings.Contains(stderr, "already running") {
		t.Errorf("second up of a running lab: exit %d, %q; want an 'already running' error", code, stderr)
	}
	if code, _, stderr := run(t, "lab", "run", "--name", name, "--dir", dir, "--", "true"); code == 0 || !strings.Contains(stderr, "already running") {
		t.Errorf("lab run over a running lab: exit %d, %q; want an 'already running' error", code, stderr)
	}
	code, out, stderr := run(t, "lab", "status", "--name", name, "--dir", dir, "--json")
	var st lab.Status
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || len(st.Paths) != 2 {
		t.Fatalf("lab status: exit %d %s %s", code, out, stderr)
	}
	if d := st.Paths[0].Up.Delay; d != 5*time.Millisecond {
		t.Errorf("--wlan0 delay=5ms: status says %v", d)
	}
	if code, out, stderr = run(t, "lab", "set", "--name", name, "--dir", dir, "wlan0", "delay=30ms", "loss=1%"); code != 0 || !strings.Contains(out, "delay=30ms") {
		t.Errorf("lab set: exit %d, out %q, err %q", code, out, stderr)
	}
	if code, out, stderr = run(t, "lab", "set", "--name", name, "--dir", dir, "wwan0", "down"); code != 0 || !strings.Contains(out, "wwan0 down") {
		t.Errorf("lab set down: exit %d, out %q, err %q", code, out, stderr)
	}
	if code, _, _ = run(t, "lab", "exec", "--name", name, "--dir", dir, "--", "sh", "-c", `test -s "$MPTESTER_CONFIG" && ip link show wlan0 >/dev/null && exit 3`); code != 3 {
		t.Errorf("lab exec: exit %d, want the command's 3 (config present, wlan0 exists)", code)
	}
	if code, _, _ = run(t, "lab", "exec", "--side", "server", "--name", name, "--dir", dir, "--", "ip", "link", "show", "r-wwan0"); code != 0 {
		t.Errorf("lab exec --side server: exit %d", code)
	}
	if code, _, stderr = run(t, "lab", "down", "--name", name, "--dir", dir); code != 0 {
		t.Fatalf("lab down: exit %d: %s", code, stderr)
	}
	if left := lab.Leftovers(name, dir); len(left) > 0 || alive(info.PID) {
		t.Errorf("after down: left %v, daemon alive %v", left, alive(info.PID))
	}

	// A crashed lab: kill -9 the daemon; its namespaces stay behind until
	// the next up removes them.
	info = up(t, name, dir)
	if err := syscall.Kill(info.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100 && alive(info.PID); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if left := lab.Leftovers(name, dir); len(left) == 0 {
		t.Errorf("a killed daemon left nothing? (expected its namespaces)")
	}
	info2 := up(t, name, dir)
	if info2.PID == info.PID {
		t.Errorf("second up reused pid %d", info.PID)
	}
	if code, _, stderr = run(t, "lab", "down", "--name", name, "--dir", dir); code != 0 {
		t.Fatalf("lab down: exit %d: %s", code, stderr)
	}
	if left := lab.Leftovers(name, dir); len(left) > 0 || alive(info2.PID) {
		t.Errorf("after down: left %v, daemon alive %v", left, alive(info2.PID))
	}
	// Down of a lab that is not there is fine and idempotent.
	if code, _, stderr = run(t, "lab", "down", "--name", name, "--dir", dir); code != 0 {
		t.Errorf("second lab down: exit %d: %s", code, stderr)
	}
}

func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] == 'Z'
}

func TestLabRunExitStatus(t *testing.T) {
	labtest.Require(t)
	name, dir := uniqueName(), shortDir(t)
	code, _, stderr := run(t, "lab", "run", "--name", name, "--dir", dir, "--domains", "0", "--",
		"sh", "-c", "ip link show wwan0 >/dev/null && exit 5")
	if code != 5 {
		t.Errorf("lab run: exit %d, want the command's 5; stderr %s", code, stderr)
	}
	if left := lab.Leftovers(name, dir); len(left) > 0 {
		t.Errorf("lab run left %v", left)
	}
}

// TestLabDemo runs the README's main-job command end to end: the survey
// it runs inside the lab must agree with the world's ground truth.
func TestLabDemo(t *testing.T) {
	labtest.Require(t)
	t.Setenv(envMain, "1") // the demo runs this binary as mptester survey
	// The demo needs no system ping: it uses mptester's own ICMP probe.
	t.Setenv("PATH", pathWithout(t, "ping"))
	if p, err := exec.LookPath("ping"); err == nil {
		t.Fatalf("ping still on PATH: %s", p)
	}
	name, dir := uniqueName(), shortDir(t)
	code, out, stderr := run(t, "lab", "demo", "--name", name, "--dir", dir, "--domains", "40", "--log-level", "warn")
	if code != 0 {
		t.Fatalf("lab demo: exit %d\n%s\n%s", code, out, stderr)
	}
	for _, want := range []string{"survey finished", "CELL probe/resolve", "wwan0/wlan0", "AGGREGATION", "CAUSE (measured / planted)", "torn down"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	// The access network: the cause run measured beside the planted truth.
	for _, want := range []string{`quic\s+wlan0\s+\S+\s+udp-blocked:443 / block=udp/443`, `quic\s+wwan0\s+success\s+- / -`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	// The resolution table: survey and truth agree exactly. Bulk over TCP
	// on each path and over every multipath transport succeeded, the
	// multipath ones received on both paths and at least one beat the best
	// single path (40 + 20 Mbit/s against 40); each handover transport ran
	// to its end with a handover.
	bulk, beat, handovers := 0, 0, 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 8 && (f[0] == "wlan0" || f[0] == "wwan0") && f[3] == "/" {
			if f[2] != f[4] || f[5] != f[7] {
				t.Errorf("demo: survey and truth differ: %q", line)
			}
		}
		if len(f) >= 10 && slices.Contains([]string{"tcp", "mptcp", "mpquic", "mphttp"}, f[0]) && f[1] != "PATH" {
			if f[2] != "success" {
				t.Errorf("demo: bulk failed: %q", line)
				continue
			}
			bulk++
			if f[1] == "both" {
				if f[5] == "0" || f[8] == "0" { // goodput "N Mbit/s", then received wlan0 / wwan0: "N unit / N unit"
					t.Errorf("demo: a multipath transport used one path: %q", line)
				}
				if r, err := strconv.ParseFloat(strings.TrimSuffix(f[len(f)-1], "x"), 64); err == nil && r > 1 {
					beat++
				}
			}
		}
		if len(f) == 9 && f[2] == "handover" && f[1] == "success" && f[4] == "/" {
			handovers++
		}
	}
	if bulk != 5 {
		t.Errorf("demo: %d of 5 bulk tests succeeded:\n%s", bulk, out)
	}
	if beat == 0 {
		t.Errorf("demo: no multipath transport beat the best single path:\n%s", out)
	}
	if handovers < 2 {
		t.Errorf("demo: %d handover transports handed over:\n%s", handovers, out)
	}
	_, page, ok := strings.Cut(out, "Report (survey, aggregation, handover, access network): ")
	page, _, _ = strings.Cut(page, "\n")
	if b, err := os.ReadFile(page); !ok || err != nil || !bytes.Contains(b, []byte("Findings")) || !bytes.Contains(b, []byte("UDP port 443 blocked")) {
		t.Errorf("demo: no report page at %q, or its findings lack the blocked port: %v", page, err)
	}
	if left := lab.Leftovers(name, dir); len(left) > 0 {
		t.Errorf("lab demo left %v", left)
	}
}

// pathWithout returns a PATH of one directory linking every program on the
// current PATH except those whose name starts with prefix.
func pathWithout(t *testing.T, prefix string) string {
	bin := t.TempDir()
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), prefix) {
				continue
			}
			_ = os.Symlink(filepath.Join(dir, e.Name()), filepath.Join(bin, e.Name())) // first on PATH wins
		}
	}
	return bin
}

// TestLabUpServesRun: the servers in lab.json answer `mptester run` as its
// help shows (default ports), with --insecure or the fingerprint lab.json
// gives; lab down says where the lab's files stay, --purge removes them.
func TestLabUpServesRun(t *testing.T) {
	labtest.Require(t)
	t.Setenv(envMain, "1") // lab exec runs this binary as mptester run
	name, dir := uniqueName(), shortDir(t)
	t.Cleanup(func() { _ = lab.CleanStale(context.Background(), name, dir) })
	info := up(t, name, dir)
	ts := info.TestServer
	if ts == nil || ts.Fingerprint == "" || !reflect.DeepEqual(ts.Ports, defaultPorts()) {
		t.Fatalf("lab.json test_server = %+v", ts)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range [][]string{{"--insecure"}, {"--pin", ts.Fingerprint}} {
		args := append([]string{"lab", "exec", "--name", name, "--dir", dir, "--", exe, "run", "--server", lab.Server4.String(),
			"--paths", "wlan0", "--patterns", "ping", "--transports", "tcp,mptcp,quic", "--ping-count", "3", "--pace", "0s",
			"--log-level", "warn"}, auth...)
		code, out, stderr := run(t, args...)
		if code != 0 {
			t.Fatalf("run %v against the lab's server: exit %d\n%s\n%s", auth, code, out, stderr)
		}
		var doc struct {
			Status  string `json:"status"`
			Records []struct {
				Status string `json:"status"`
			} `json:"records"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("run output: %v\n%s", err, out)
		}
		ok := 0
		for _, r := range doc.Records {
			if r.Status == "success" {
				ok++
			}
		}
		if doc.Status != "ok" || ok != 3 {
			t.Errorf("run %v: status %s, %d of 3 tests succeeded\n%s", auth, doc.Status, ok, out)
		}
	}
	// A server that accepts and never answers (the lab's TCP 80 reads until
	// EOF): each test ends within --connect-timeout (1 s here), not after
	// the ping pattern's own timeout.
	start := time.Now()
	code, out, stderr := run(t, "lab", "exec", "--name", name, "--dir", dir, "--", exe, "run", "--server", lab.Server4.String(),
		"--tcp-port", "80", "--insecure", "--paths", "wlan0", "--patterns", "ping", "--transports", "tcp,mptcp",
		"--connect-timeout", "1s", "--pace", "0s", "--log-level", "warn")
	elapsed := time.Since(start)
	var silent struct {
		Records []struct {
			Status     string    `json:"status"`
			Error      string    `json:"error"`
			StartedAt  time.Time `json:"started_at"`
			FinishedAt time.Time `json:"finished_at"`
		} `json:"records"`
	}
	if err := json.Unmarshal([]byte(out), &silent); err != nil || code != 3 || len(silent.Records) != 2 {
		t.Fatalf("run against a silent server: exit %d, err %v\n%s\n%s", code, err, out, stderr)
	}
	for _, r := range silent.Records {
		d := r.FinishedAt.Sub(r.StartedAt)
		if r.Status != "connection-timeout" || !strings.Contains(r.Error, "--connect-timeout") || d < time.Second || d > 1500*time.Millisecond {
			t.Errorf("silent server: status %s after %v (want connection-timeout within 1 s + 0.5 s): %s", r.Status, d, r.Error)
		}
	}
	if elapsed > 6*time.Second {
		t.Errorf("run against a silent server took %v (2 tests, 1 s connect timeout)", elapsed)
	}

	code, out, stderr = run(t, "lab", "down", "--name", name, "--dir", dir)
	if code != 0 || !strings.Contains(out, dir) || !strings.Contains(out, "--purge") {
		t.Errorf("lab down: exit %d, %q %s; want it to say where the files stay", code, out, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "lab.log")); err != nil {
		t.Errorf("lab down removed lab.log: %v", err)
	}
	code, out, stderr = run(t, "lab", "down", "--purge", "--name", name, "--dir", dir)
	if code != 0 || !strings.Contains(out, "removed") {
		t.Errorf("lab down --purge: exit %d, %q %s", code, out, stderr)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		ents, _ := os.ReadDir(dir)
		t.Errorf("lab down --purge left %s: %v", dir, ents)
	}

	// --no-serve: no test server.
	dir2 := shortDir(t)
	code, out, stderr = run(t, "lab", "up", "--no-serve", "--name", name, "--dir", dir2, "--domains", "0")
	if code != 0 {
		t.Fatalf("lab up --no-serve: exit %d: %s", code, stderr)
	}
	var info2 lab.Info
	if err := json.Unmarshal([]byte(out), &info2); err != nil || info2.TestServer != nil {
		t.Errorf("lab up --no-serve: test_server %+v (err %v)", info2.TestServer, err)
	}
	if code, _, stderr = run(t, "lab", "down", "--name", name, "--dir", dir2); code != 0 {
		t.Errorf("lab down: exit %d: %s", code, stderr)
	}
}

// defaultPorts are the ports `mptester run` uses by default, per listening
// transport: the lab's test server must listen on exactly these.
func defaultPorts() map[string][]int {
	out := map[string][]int{}
	for _, d := range transport.Listeners() {
		for _, p := range []uint16{d.DefaultPort, d.AltPort} {
			if p != 0 {
				out[d.Name] = append(out[d.Name], int(p))
			}
		}
	}
	return out
}
