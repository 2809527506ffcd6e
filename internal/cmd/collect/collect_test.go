package collect

import (
	"bytes"
	"context"
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
	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/patterns/transport"
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
	opts := &Options{IO: io, Logger: slog.New(slog.DiscardHandler), Ctx: ctx, Data: data, Listen: "127.0.0.1:0",
		Limits: collect.DefaultLimits(), Ready: func(a net.Addr) { addr <- a }}
	done := make(chan error, 1)
	go func() { done <- collectRun(opts) }()
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
	pin, err := transport.ParseFingerprint(fm[1])
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
	for _, args := range [][]string{{"--cert", "x.pem"}, {"--plain-http", "--cert", "a", "--key", "b"}, {"--max-inflight", "0"}, {"--listen", "nonsense"}} {
		_, err := execute(t, append([]string{"--data", t.TempDir()}, args...)...)
		assert.ErrorIs(t, err, cmdutil.ErrUsage, "%v", args)
	}
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
