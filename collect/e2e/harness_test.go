//go:build linux && !race

// Package e2e tests the fleet pipeline with real processes: the mptester
// binary as collector (killed with SIGKILL and restarted), as uploading
// probes and as the measuring command.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/internal/certs"
	"github.com/mptester/mptester/upload"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mptester-e2e-")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "mptester")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/mptester").CombinedOutput()
	if b := os.Getenv("MPTESTER_E2E_BIN"); b != "" {
		// Another build (benchmarks compare builds in one invocation).
		bin = b
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "build mptester: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// collector is `mptester collect` as a child process on a fixed loopback
// port, so it can be killed and restarted in place.
type collector struct {
	t     testing.TB
	data  string
	db    string
	addr  string
	url   string
	pin   string
	extra []string
	// command, when set, makes the collector's command (in a lab namespace).
	command func(args ...string) *exec.Cmd
	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
}

func newCollector(t testing.TB, data, db string, extra ...string) *collector {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	// One certificate for every restart, so the probes' pin stays valid.
	cert, fp, err := certs.SelfSigned(nil)
	require.NoError(t, err)
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600))
	extra = append(extra, "--cert", certFile, "--key", keyFile)
	c := &collector{t: t, data: data, db: db, addr: addr, url: "https://" + addr, pin: fp, extra: extra}
	t.Cleanup(c.kill)
	return c
}

func (c *collector) args(sub ...string) []string {
	a := append([]string{"collect", "--data", c.data, "--log-level", "warn"}, sub...)
	if c.db != "" {
		a = append(a, "--db", c.db)
	}
	return a
}

// enrol adds probe name and returns its token.
func (c *collector) enrol(name string) string {
	out, err := exec.Command(bin, c.args("probe", "add", name)...).CombinedOutput()
	require.NoError(c.t, err, "%s", out)
	m := regexp.MustCompile(`token: ([0-9a-f]{64})`).FindSubmatch(out)
	require.NotNil(c.t, m, "%s", out)
	return string(m[1])
}

// start runs the collector and waits until it listens.
func (c *collector) start() {
	c.t.Helper()
	args := c.args(append([]string{"--listen", c.addr}, c.extra...)...)
	cmd := exec.Command(bin, args...)
	if c.command != nil {
		cmd = c.command(args...)
	}
	stdout, err := cmd.StdoutPipe()
	require.NoError(c.t, err)
	cmd.Stderr = io.Discard
	require.NoError(c.t, cmd.Start())
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	sc := bufio.NewScanner(stdout)
	deadline := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
	defer deadline.Stop()
	for sc.Scan() {
		line := sc.Text()
		if fp, ok := strings.CutPrefix(line, "certificate SHA-256 fingerprint: "); ok {
			c.pin = fp
		}
		if strings.HasPrefix(line, "listening on ") {
			go io.Copy(io.Discard, stdout)
			c.mu.Lock()
			c.cmd, c.exited = cmd, exited
			c.mu.Unlock()
			return
		}
	}
	c.t.Fatalf("collector did not start (its port may be taken)")
}

func (c *collector) kill() {
	c.mu.Lock()
	cmd, exited := c.cmd, c.exited
	c.cmd = nil
	c.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// probeEnv is one probe: its config file, token file and spool.
type probeEnv struct {
	name   string
	dir    string
	config string
	spool  string
}

// newProbe enrols name and writes its config, pinning the collector's
// certificate.
func newProbe(t testing.TB, c *collector, name string, extra string) *probeEnv {
	dir := t.TempDir()
	p := &probeEnv{name: name, dir: dir, config: filepath.Join(dir, "mptester.yaml"), spool: filepath.Join(dir, "spool")}
	tok := c.enrol(name)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte(tok+"\n"), 0o600))
	cfg := fmt.Sprintf("probe_id: %s\nupload:\n  url: %s\n  token_file: %s\n  pin: %q\n  spool: %s\n  timeout: 30s\n  attempts: 3\n  retry_max: 300ms\n%s",
		name, c.url, filepath.Join(dir, "token"), c.pin, p.spool, extra)
	require.NoError(t, os.WriteFile(p.config, []byte(cfg), 0o600))
	return p
}

// uploadOnce runs `mptester upload` and returns its exit code and the run
// ids it logged as uploaded (2xx receipts with a matching hash).
func (p *probeEnv) uploadOnce(ctx context.Context) (int, []string, error) {
	cmd := exec.CommandContext(ctx, bin, "upload", "--config", p.config, "--log-level", "info")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return 0, nil, err
	}
	if err := cmd.Start(); err != nil {
		return 0, nil, err
	}
	var ids []string
	sc := bufio.NewScanner(stderr)
	re := regexp.MustCompile(`msg=uploaded run_id=([0-9a-f-]{36})`)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			ids = append(ids, m[1])
		}
	}
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), ids, nil
	}
	return 0, ids, err
}

// fixture is report/testdata's stream for run id by probe, padded with
// pad extra records so uploads take a while.
func fixture(t testing.TB, id, probe string, pad int) []byte {
	b, err := os.ReadFile(filepath.Join("..", "..", "report", "testdata", "stream.jsonl"))
	require.NoError(t, err)
	s := strings.ReplaceAll(string(b), "0f8c3f6e-3c1a-4c36-9a55-1f2d1c5e7a10", id)
	s = strings.ReplaceAll(s, "m-0123456789abcdef", probe)
	if pad > 0 {
		lines := strings.SplitAfter(s, "\n")
		var extra strings.Builder
		for i := 0; i < pad; i++ {
			fmt.Fprintf(&extra, `{"type":"rtt","path":"wwan0","target":"198.18.%d.%d","ms":%d.25}`+"\n", i/250%250, i%250, i%997)
		}
		s = lines[0] + lines[1] + lines[2] + extra.String() + strings.Replace(lines[3], `"records":2`, fmt.Sprintf(`"records":%d`, 2+pad), 1)
	}
	return []byte(s)
}

func spoolFixture(t testing.TB, dir, id string, body []byte) {
	sp, err := upload.OpenSpool(dir, upload.Quota{})
	require.NoError(t, err)
	e, err := sp.Create(id, ".jsonl")
	require.NoError(t, err)
	_, err = e.Write(body)
	require.NoError(t, err)
	require.NoError(t, e.Commit())
}

// stored reads the collector's index and raw uploads (collector stopped).
func stored(t testing.TB, c *collector) map[string][]byte {
	got, _ := storedFiles(t, c)
	return got
}

// storedFiles is stored, and how many of the runs are kept as files.
func storedFiles(t testing.TB, c *collector) (map[string][]byte, int) {
	dsn := c.db
	if dsn == "" {
		dsn = filepath.Join(c.data, "collect.db")
	}
	st, err := store.Open(context.Background(), dsn)
	require.NoError(t, err)
	defer st.Close()
	out := map[string][]byte{}
	files := 0
	var after int64
	for {
		page, err := st.ListRuns(context.Background(), store.RunFilter{After: after})
		require.NoError(t, err)
		if len(page) == 0 {
			return out, files
		}
		for _, r := range page {
			require.NotContains(t, out, r.RunID, "one row per run")
			var b []byte
			if r.RawPath == store.RawInline {
				b, err = st.GetRaw(context.Background(), r.RunID)
			} else {
				files++
				b, err = os.ReadFile(filepath.Join(c.data, r.RawPath))
			}
			require.NoError(t, err, "raw upload of %s", r.RunID)
			out[r.RunID] = b
		}
		after = page[len(page)-1].Seq
	}
}

func pending(t testing.TB, spool string) (n, rejected int) {
	sp, err := upload.OpenSpool(spool, upload.Quota{})
	require.NoError(t, err)
	p, err := sp.Pending()
	require.NoError(t, err)
	r, err := sp.Rejected()
	require.NoError(t, err)
	return len(p), len(r)
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// startServe runs `mptester serve` on a loopback port (TCP and QUIC) for
// the test and returns the port.
func startServe(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	serve := exec.Command(bin, "serve", "--listen", "127.0.0.1", "--tcp-port", fmt.Sprint(port), "--quic-port", fmt.Sprint(port))
	out, err := serve.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, serve.Start())
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
	sc := bufio.NewScanner(out)
	require.True(t, sc.Scan(), "serve started")
	go io.Copy(io.Discard, out)
	return port
}

// killEvery SIGKILLs and restarts the collector at random moments (every
// 0.3-1.2 s) until ctx is done, and returns how often.
func killEvery(ctx context.Context, c *collector) int {
	kills := 0
	for {
		select {
		case <-ctx.Done():
			return kills
		case <-time.After(300*time.Millisecond + rand.N(900*time.Millisecond)):
		}
		c.kill()
		kills++
		c.start()
	}
}
