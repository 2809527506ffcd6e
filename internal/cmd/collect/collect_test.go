package collect

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/collect/api"
	"github.com/mptester/mptester/internal/certs"
	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/internal/config"
)

func execute(t *testing.T, args ...string) (string, error) {
	io, out, _ := cmdutil.Test()
	cmd := NewCmdCollect(&cmdutil.Factory{IO: io, Logger: slog.New(slog.DiscardHandler)}, nil)
	cmd.SetArgs(args)
	cmd.SetContext(context.Background())
	err := cmd.Execute()
	return out.String(), err
}

// TestEnrolServeUpload: probe add prints a token and the probe's config
// lines; the server prints its fingerprint; an upload over TLS pinned to
// it is stored; after probe revoke the same token gets 401.
func TestEnrolServeUpload(t *testing.T) {
	data := t.TempDir()
	out, err := execute(t, "--data", data, "probe", "add", "pi1", "--url", "https://collect.example:8080")
	require.NoError(t, err)
	m := regexp.MustCompile(`token: ([0-9a-f]{64})\n`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	tok := m[1]
	assert.Contains(t, out, "probe_id: pi1\n")
	assert.Contains(t, out, `upload: {url: "https://collect.example:8080", token_file: `)
	_, err = execute(t, "--data", data, "probe", "add", "pi1")
	assert.ErrorIs(t, err, cmdutil.ErrUsage, "a name is enrolled once")
	_, err = execute(t, "--data", data, "probe", "add", "bad name")
	assert.ErrorIs(t, err, cmdutil.ErrUsage)
	db, err := os.ReadFile(filepath.Join(data, "collect.db"))
	require.NoError(t, err)
	assert.False(t, bytes.Contains(db, []byte(tok)), "only the token's hash is stored")

	io, sout, _ := cmdutil.Test()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	opts := &Options{IO: io, Logger: slog.New(slog.DiscardHandler), Data: data, Listen: "127.0.0.1:0",
		Limits: collect.DefaultLimits(), Drain: 10 * time.Second, Ready: func(a net.Addr) { addr <- a }}
	done := make(chan error, 1)
	go func() { done <- collectRun(ctx, opts) }()
	var a net.Addr
	select {
	case a = <-addr:
	case err := <-done:
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		t.Fatal("collect did not start")
	}
	fm := regexp.MustCompile(`fingerprint: ([0-9A-Fa-f:]+)\n`).FindStringSubmatch(sout.String())
	require.NotNil(t, fm, sout.String())
	pin, err := certs.ParseFingerprint(fm[1])
	require.NoError(t, err)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, // verified by the pin below
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if sha256.Sum256(raw[0]) != pin {
				return errors.New("pin mismatch")
			}
			return nil
		}}}}
	put := func() int {
		id := uuid.NewString()
		b, err := os.ReadFile("../../../report/testdata/stream.jsonl")
		require.NoError(t, err)
		body := strings.ReplaceAll(strings.ReplaceAll(string(b), "0f8c3f6e-3c1a-4c36-9a55-1f2d1c5e7a10", id), "m-0123456789abcdef", "pi1")
		req, _ := http.NewRequest(http.MethodPut, "https://"+a.String()+"/v1/runs/"+id, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusCreated, put())
	_, err = execute(t, "--data", data, "probe", "revoke", "pi1")
	require.NoError(t, err)
	revoked := time.Now()
	// The running collector may answer from its token cache for at most
	// collect.TokenTTL after the revocation (another process's write): its
	// entry dates from the upload before it. Checked with a read probes
	// may not make (403 while the token is known, 401 once revoked), so
	// no run is stored meanwhile.
	authStatus := func() int {
		req, _ := http.NewRequest(http.MethodGet, "https://"+a.String()+"/v1/runs", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	time.Sleep(time.Until(revoked.Add(collect.TokenTTL)))
	require.Equal(t, http.StatusUnauthorized, authStatus(), "revoked token still accepted TokenTTL after the revocation")
	assert.Equal(t, http.StatusUnauthorized, put())
	_, err = execute(t, "--data", data, "probe", "revoke", "nobody")
	assert.ErrorIs(t, err, cmdutil.ErrUsage)
	out, err = execute(t, "--data", data, "probe", "list")
	require.NoError(t, err)
	assert.Contains(t, out, `"runs": 1`)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("collect did not stop")
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--cert", "x.pem"}, {"--plain-http", "--cert", "a", "--key", "b"}, {"--max-inflight", "0"}, {"--max-inflight-probe", "0"}, {"--min-rate", "0"}, {"--rate-window", "0s"}, {"--upload-timeout", "-1s"}, {"--max-zstd", "0"}, {"--listen", "nonsense"}, {"--drain", "0s"}} {
		_, err := execute(t, append([]string{"--data", t.TempDir()}, args...)...)
		assert.ErrorIs(t, err, cmdutil.ErrUsage, "%v", args)
	}
}

// TestRestartKeepsFingerprint: the self-signed certificate is kept in
// --data, so a restarted collector keeps the fingerprint probes pinned.
func TestRestartKeepsFingerprint(t *testing.T) {
	data := t.TempDir()
	start := func() string {
		io, sout, _ := cmdutil.Test()
		ctx, cancel := context.WithCancel(context.Background())
		addr := make(chan net.Addr, 1)
		opts := &Options{IO: io, Logger: slog.New(slog.DiscardHandler), Data: data, Listen: "127.0.0.1:0",
			Limits: collect.DefaultLimits(), Drain: time.Second, Ready: func(a net.Addr) { addr <- a }}
		done := make(chan error, 1)
		go func() { done <- collectRun(ctx, opts) }()
		select {
		case <-addr:
		case err := <-done:
			t.Fatal(err)
		}
		cancel()
		require.NoError(t, <-done)
		fm := regexp.MustCompile(`fingerprint: ([0-9A-Fa-f:]+)\n`).FindStringSubmatch(sout.String())
		require.NotNil(t, fm, sout.String())
		return fm[1]
	}
	assert.Equal(t, start(), start())
}

// TestScheduleSet: a schedule for a probe that is not enrolled (a typo)
// and a schedule that fails its checks are refused (usage error naming the
// probe or the field) and not stored; a good one is stored for an
// enrolled probe and for '*'.
func TestScheduleSet(t *testing.T) {
	data := t.TempDir()
	_, err := execute(t, "--data", data, "probe", "add", "pi1")
	require.NoError(t, err)
	file := func(body string) string {
		f := filepath.Join(t.TempDir(), "s.json")
		require.NoError(t, os.WriteFile(f, []byte(body), 0o600))
		return f
	}
	good := file(`{"tasks":[{"name":"s","type":"survey","every":"6h","survey":{"top":1000,"rate":50}}]}`)
	_, err = execute(t, "--data", data, "schedule", "set", "nosuchprobe", good)
	require.ErrorIs(t, err, cmdutil.ErrUsage)
	assert.Contains(t, err.Error(), `probe "nosuchprobe" is not enrolled`)
	_, err = execute(t, "--data", data, "schedule", "set", "pi1", file(`{"tasks":[{"name":"s","type":"survey","every":"6h","survey":{"rate":50,"output":"/tmp/x"}}]}`))
	require.ErrorIs(t, err, cmdutil.ErrUsage)
	assert.Contains(t, err.Error(), "tasks[0].survey (task s): additional properties 'output' not allowed")
	_, err = execute(t, "--data", data, "schedule", "set", "pi1", file(`{"tasks":[{"name":"s","type":"survey","every":"6h","survey":{"rate":5000}}]}`))
	require.ErrorIs(t, err, cmdutil.ErrUsage)
	assert.Contains(t, err.Error(), "survey.rate (task s): 5000 probes/s is over the cap of 200 (the probe owner's cap) (probe pi1)")
	out, err := execute(t, "--data", data, "schedule", "set", "pi1", good)
	require.NoError(t, err)
	assert.Equal(t, "schedule of pi1: revision 1\n", out, "the refused attempts stored nothing")
	out, err = execute(t, "--data", data, "schedule", "set", "*", good)
	require.NoError(t, err)
	assert.Equal(t, "schedule of *: revision 1\n", out)
}

// TestScheduleSign: keygen writes a 0600 key (never over another) and
// prints the public key; sign makes a schedule that verifies with it,
// carries the serial and probe, and is stored by schedule set.
func TestScheduleSign(t *testing.T) {
	data := t.TempDir()
	_, err := execute(t, "--data", data, "probe", "add", "pi1")
	require.NoError(t, err)
	key := filepath.Join(t.TempDir(), "fleet.key")
	out, err := execute(t, "schedule", "keygen", key)
	require.NoError(t, err)
	m := regexp.MustCompile(`schedule_key: (\S+)\n`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	fi, err := os.Stat(key)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	_, err = execute(t, "schedule", "keygen", key)
	assert.ErrorIs(t, err, cmdutil.ErrUsage, "never overwritten")

	file := filepath.Join(t.TempDir(), "s.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"tasks":[{"name":"s","type":"survey","every":"6h","survey":{"top":10}}]}`), 0o600))
	out, err = execute(t, "schedule", "sign", "--key", key, "--serial", "3", "--probe", "pi1", file)
	require.NoError(t, err)
	s, err := api.ParseSchedule([]byte(out))
	require.NoError(t, err)
	pub, err := config.ScheduleKey(m[1])
	require.NoError(t, err)
	assert.True(t, ed25519.Verify(pub, s.Signed.Payload, s.Signed.Sig))
	assert.Equal(t, int64(3), s.Serial)
	assert.Equal(t, "pi1", s.Probe)
	require.Len(t, s.Tasks, 1)
	signed := filepath.Join(t.TempDir(), "signed.json")
	require.NoError(t, os.WriteFile(signed, []byte(out), 0o600))
	out, err = execute(t, "--data", data, "schedule", "set", "pi1", signed)
	require.NoError(t, err)
	assert.Equal(t, "schedule of pi1: revision 1\n", out)
	_, err = execute(t, "schedule", "sign", "--key", key, "--serial", "0", file)
	assert.ErrorIs(t, err, cmdutil.ErrUsage)
}

// TestExportCLI: collect export writes the enrolled probes and the (empty)
// tables it has rows for, and names each file with its row count.
func TestExportCLI(t *testing.T) {
	data, out := t.TempDir(), filepath.Join(t.TempDir(), "pq")
	_, err := execute(t, "--data", data, "probe", "add", "pi1")
	require.NoError(t, err)
	_, err = execute(t, "--data", data, "probe", "add", "pi2")
	require.NoError(t, err)
	got, err := execute(t, "--data", data, "export", "--format", "parquet", "--probe", "pi2", "-o", out)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(out, "probes", "probes.parquet")+"\t1 rows\n", got)
	fi, err := os.Stat(filepath.Join(out, "probes", "probes.parquet"))
	require.NoError(t, err)
	assert.Positive(t, fi.Size())
}
