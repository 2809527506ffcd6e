package collect

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/internal/certs"
	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/upload"
)

// serveCollect runs `mptester collect` on loopback until the returned stop
// is called; it returns the address and the fingerprint the start printed.
func serveCollect(t *testing.T, data string) (string, string, func()) {
	t.Helper()
	io, sout, _ := cmdutil.Test()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	opts := &Options{IO: io, Logger: slog.New(slog.DiscardHandler), Data: data, Listen: "127.0.0.1:0", Drain: time.Second,
		Limits: collect.DefaultLimits(), Ready: func(a net.Addr) { addr <- a }}
	done := make(chan error, 1)
	go func() { done <- collectRun(ctx, opts) }()
	var a net.Addr
	select {
	case a = <-addr:
	case err := <-done:
		cancel()
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("collect did not start")
	}
	fm := regexp.MustCompile(`fingerprint: ([0-9A-F:]{95})\n`).FindStringSubmatch(sout.String())
	require.NotNil(t, fm, sout.String())
	stop := func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(15 * time.Second):
			t.Fatal("collect did not stop")
		}
	}
	return a.String(), fm[1], stop
}

// spoolRun puts one result of probe into the spool and returns its id.
func spoolRun(t *testing.T, sp *upload.Spool, probe string) string {
	id := uuid.NewString()
	b, err := os.ReadFile("../../../report/testdata/stream.jsonl")
	require.NoError(t, err)
	body := strings.ReplaceAll(strings.ReplaceAll(string(b), "0f8c3f6e-3c1a-4c36-9a55-1f2d1c5e7a10", id), "m-0123456789abcdef", probe)
	e, err := sp.Create(id, ".jsonl")
	require.NoError(t, err)
	_, err = e.Write([]byte(body))
	require.NoError(t, err)
	require.NoError(t, e.Commit())
	return id
}

// TestIdentitySurvivesRestart: the self-signed identity is created once
// (0600 in --data), printed by `probe add` and at every start, so a pinned
// upload succeeds across restarts; a changed certificate is a permanent
// pin error naming both fingerprints (exit 9), not retried, the result kept.
func TestIdentitySurvivesRestart(t *testing.T) {
	data := t.TempDir()
	out, err := execute(t, "--data", data, "probe", "add", "pi1", "--url", "https://collect.example:8080")
	require.NoError(t, err)
	tok := regexp.MustCompile(`token: ([0-9a-f]{64})\n`).FindStringSubmatch(out)
	fm := regexp.MustCompile(`fingerprint: ([0-9A-F:]{95})\n`).FindStringSubmatch(out)
	require.NotNil(t, tok, out)
	require.NotNil(t, fm, out)
	fp := fm[1]
	assert.Contains(t, out, `pin: "`+fp+`"}`)
	fi, err := os.Stat(filepath.Join(data, "tls-identity.pem"))
	require.NoError(t, err)
	if runtime.GOOS != "windows" {
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	}

	pin, err := certs.ParseFingerprint(fp)
	require.NoError(t, err)
	tokFile := filepath.Join(t.TempDir(), "tok")
	require.NoError(t, os.WriteFile(tokFile, []byte(tok[1]), 0o600))
	sp, err := upload.OpenSpool(t.TempDir(), upload.Quota{})
	require.NoError(t, err)
	var logs bytes.Buffer
	f := &cmdutil.Factory{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	up := func(addr string) error {
		set := upload.Settings{URL: "https://" + addr, Token: tok[1], Pin: &pin, Compression: upload.CompressZstd,
			Timeout: time.Minute, Backoff: upload.Backoff{Base: time.Millisecond, Max: time.Millisecond, Attempts: 5}}
		return f.Upload(context.Background(), set, sp)
	}

	for i := range 2 {
		addr, got, stop := serveCollect(t, data)
		assert.Equal(t, fp, got, "start %d", i+1)
		spoolRun(t, sp, "pi1")
		require.NoError(t, up(addr), "start %d", i+1)
		stop()
	}
	left, err := sp.Pending()
	require.NoError(t, err)
	assert.Empty(t, left)

	// A new identity (the file lost): probes pinned to the old one stop.
	require.NoError(t, os.Remove(filepath.Join(data, "tls-identity.pem")))
	addr, got, stop := serveCollect(t, data)
	defer stop()
	require.NotEqual(t, fp, got)
	spoolRun(t, sp, "pi1")
	err = up(addr)
	require.ErrorIs(t, err, certs.ErrPinMismatch)
	assert.Equal(t, cmdutil.ExitPinMismatch, cmdutil.ExitCode(err))
	assert.Contains(t, err.Error(), got, "names the server's fingerprint")
	assert.Contains(t, err.Error(), fp, "names the pin")
	assert.NotContains(t, logs.String(), "retrying", "a pin mismatch is not retried")
	left, err = sp.Pending()
	require.NoError(t, err)
	assert.Len(t, left, 1, "the result stays in the spool")
}

// TestRejectedExitCode: a result the collector refuses for good (403: not
// this token's probe) moves to rejected/ and the upload exits 10.
func TestRejectedExitCode(t *testing.T) {
	data := t.TempDir()
	out, err := execute(t, "--data", data, "probe", "add", "pi1")
	require.NoError(t, err)
	tok := regexp.MustCompile(`token: ([0-9a-f]{64})\n`).FindStringSubmatch(out)
	require.NotNil(t, tok, out)
	addr, fp, stop := serveCollect(t, data)
	defer stop()
	pin, err := certs.ParseFingerprint(fp)
	require.NoError(t, err)
	sp, err := upload.OpenSpool(t.TempDir(), upload.Quota{})
	require.NoError(t, err)
	spoolRun(t, sp, "pi1")
	spoolRun(t, sp, "someone-else")
	set := upload.Settings{URL: "https://" + addr, Token: tok[1], Pin: &pin, Timeout: time.Minute, Backoff: upload.DefaultBackoff()}
	err = (&cmdutil.Factory{Logger: slog.New(slog.DiscardHandler)}).Upload(context.Background(), set, sp)
	require.ErrorIs(t, err, cmdutil.ErrRejected)
	assert.Equal(t, cmdutil.ExitRejected, cmdutil.ExitCode(err))
	rej, err := sp.Rejected()
	require.NoError(t, err)
	assert.Len(t, rej, 1)
}
