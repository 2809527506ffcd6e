package survey

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/internal/config"
	"github.com/mptester/mptester/internal/dnstest"
	"github.com/mptester/mptester/report"
)

// zone answers a.test with 127.0.0.1 and b.test with 127.0.0.2; the rest
// is NXDOMAIN.
func startDNS(t *testing.T) string {
	t.Helper()
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		ips := map[string]string{"a.test.": "127.0.0.1", "b.test.": "127.0.0.2"}
		ip, ok := ips[q.Name]
		switch {
		case !ok:
			m.Rcode = dns.RcodeNameError
		case q.Qtype == dns.TypeA:
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.ParseIP(ip)})
		}
		w.WriteMsg(m)
	})
	return dnstest.Serve(t, h).String()
}

func runCLI(t *testing.T, args ...string) (string, string, error) {
	return runCLITTY(t, false, args...)
}

func runCLITTY(t *testing.T, tty bool, args ...string) (string, string, error) {
	t.Helper()
	ios, out, errOut := cmdutil.Test()
	ios.SetTTY(false, tty)
	f := &cmdutil.Factory{IO: ios, Logger: slog.New(slog.NewTextHandler(errOut, nil))}
	cmd := NewCmdSurvey(f, nil)
	cmd.SilenceUsage = true
	cmd.SetArgs(args)
	cmd.SetOut(out)
	cmd.SetErr(errOut)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func TestSurveyCommandLoopback(t *testing.T) {
	server := startDNS(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	list := filepath.Join(t.TempDir(), "list.csv")
	require.NoError(t, os.WriteFile(list, []byte("1,a.test\n2,b.test\nnot a line,,\n3,A.TEST\n4,missing.test\n"), 0o644))

	args := []string{"--list", list, "--paths", "lo", "--dns", "lo=" + server, "--method", "tcp-connect",
		"--port", fmt.Sprint(port), "--count", "2", "--family", "4", "--rate", "500", "--timeout", "300ms", "--spacing", "1ms"}
	stdout, stderr, err := runCLI(t, args...)
	require.NoError(t, err, stderr)
	assert.Contains(t, stderr, "malformed list lines skipped")
	assert.NotContains(t, stderr, "ETA", "no progress bar without a terminal")

	// On a terminal, stderr shows the progress of each stage; stdout stays JSON.
	ttyOut, ttyErr, err := runCLITTY(t, true, args...)
	require.NoError(t, err)
	assert.Contains(t, ttyErr, "resolve")
	assert.Contains(t, ttyErr, "probe")
	assert.Contains(t, ttyErr, "ETA")
	assert.NotContains(t, ttyOut, "ETA")
	require.NoError(t, report.ValidateStream(strings.NewReader(stdout)), "output follows the envelope schema")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var first, last map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last))
	assert.Equal(t, "header", first["type"])
	assert.Equal(t, "trailer", last["type"])
	assert.Equal(t, "ok", last["status"])
	var sum struct {
		Type       string
		Resolution []struct{ Domains, Resolved, Failed int }
		Cells      []struct{ Targets, Responsive int }
	}
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-2]), &sum))
	assert.Equal(t, "summary", sum.Type)
	require.Len(t, sum.Resolution, 1)
	assert.Equal(t, 3, sum.Resolution[0].Domains, "duplicate A.TEST dropped, malformed line skipped")
	assert.Equal(t, 2, sum.Resolution[0].Resolved)
	require.Len(t, sum.Cells, 1)
	assert.Equal(t, 2, sum.Cells[0].Targets)
	assert.Equal(t, 2, sum.Cells[0].Responsive)
}

func TestSurveyCommandBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--paths", "lo", "--tranco-url", "ftp://x"}, "--tranco-url"},
		{[]string{"--list", "/nonexistent/list.csv", "--paths", "lo"}, "no such file"},
		{[]string{"--list", "x", "--method", "carrier-pigeon"}, "--method"},
		{[]string{"--list", "x", "--max-bytes", "wwan0"}, "PATH=SIZE"},
		{[]string{"--list", "x", "--public-prefix", "nope"}, "--public-prefix"},
		{[]string{"--list", "x", "--rate", "0"}, "--rate"},
		{[]string{"--list", "x", "--list-id", "latest"}, "not both"},
		{[]string{"--list", "x", "--nat64-prefix", "wwan0"}, "PATH=PREFIX"},
		{[]string{"--list", "x", "--nat64-prefix", "wwan0=198.18.0.0/16"}, "not an IPv6 prefix"},
		{[]string{"--list", "x", "--nat64-prefix", "wwan0=64:ff9b::/80"}, "RFC 6052 prefixes"},
		{[]string{"--list", "x", "--nat64-prefix", "wwan0=64:ff9b::1/96"}, "host bits set"},
		{[]string{"--list", "x", "--nat64-prefix", "wwan0=64:ff9b:0:0:ff00::/96"}, "bits 64-71"},
		{[]string{"--list", "x", "--nat64-prefix", "wwan0=64:ff9b::/96", "--nat64-prefix", "wwan0=fd00:64::/96"}, "given twice"},
	} {
		_, _, err := runCLI(t, tc.args...)
		require.Error(t, err, tc.args)
		assert.ErrorIs(t, err, cmdutil.ErrUsage, tc.args)
		assert.Contains(t, err.Error(), tc.want)
	}
}

// A path without DNS still completes; the run is partial (exit code 3).
func TestSurveyCommandPathWithoutDNS(t *testing.T) {
	list := filepath.Join(t.TempDir(), "list.csv")
	require.NoError(t, os.WriteFile(list, []byte("1,a.test\n"), 0o644))
	stdout, stderr, err := runCLI(t, "--list", list, "--paths", "lo", "--method", "tcp-connect", "--family", "4")
	require.Error(t, err)
	assert.ErrorIs(t, err, cmdutil.ErrPartial)
	assert.Equal(t, cmdutil.ExitPartial, cmdutil.ExitCode(err))
	assert.Contains(t, stderr, "no DNS server")
	assert.Contains(t, stdout, `"status":"partial"`)
	assert.True(t, bytes.Contains([]byte(stdout), []byte(`"type":"summary"`)))
}

func TestSurveyCommandResumeNeedsNewFile(t *testing.T) {
	dir := t.TempDir()
	list := filepath.Join(dir, "list.csv")
	out := filepath.Join(dir, "out.jsonl")
	require.NoError(t, os.WriteFile(list, []byte("1,a.test\n"), 0o644))
	require.NoError(t, os.WriteFile(out, []byte("{}\n"), 0o644))
	_, _, err := runCLI(t, "--list", list, "--paths", "lo", "--dns", "lo=127.0.0.1:9", "--method", "tcp-connect", "--resume", out, "--out", out)
	require.ErrorIs(t, err, cmdutil.ErrUsage)
	assert.Contains(t, err.Error(), "different --output")
}

// SIGINT/SIGTERM cancel the command's context: the output still ends with a
// summary and a trailer, both "partial", and the exit code is 130.
func TestSurveyCommandCancelled(t *testing.T) {
	server := startDNS(t)
	list := filepath.Join(t.TempDir(), "list.csv")
	require.NoError(t, os.WriteFile(list, []byte("1,a.test\n2,b.test\n"), 0o644))
	ios, _, errOut := cmdutil.Test()
	out := &syncBuffer{}
	ios.Out = out
	f := &cmdutil.Factory{IO: ios, Logger: slog.New(slog.NewTextHandler(errOut, nil))}
	cmd := NewCmdSurvey(f, nil)
	cmd.SilenceUsage = true
	cmd.SetArgs([]string{"--list", list, "--paths", "lo", "--dns", "lo=" + server, "--method", "tcp-connect",
		"--port", "9", "--count", "50", "--rate", "20", "--family", "4"})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Cancel once probing has started (the first resolution is out).
		for !strings.Contains(out.String(), `"type":"resolution"`) {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		cancel()
	}()
	err := cmd.ExecuteContext(ctx)
	require.ErrorIs(t, err, cmdutil.ErrCancelled)
	assert.Equal(t, cmdutil.ExitCancelled, cmdutil.ExitCode(err))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	assert.Contains(t, lines[len(lines)-2], `"type":"summary"`)
	assert.Contains(t, lines[len(lines)-2], `"status":"partial"`)
	assert.Contains(t, lines[len(lines)-1], `"type":"trailer"`)
	assert.Contains(t, lines[len(lines)-1], `"status":"partial"`)
	assert.NoError(t, report.ValidateStream(strings.NewReader(out.String())), "an interrupted output is still a valid stream")
}

// syncBuffer is an output the test reads while the command writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The config file's survey section fills what flags leave unset; flags
// win; a bad value is a usage error naming the key.
func TestSurveyConfigSection(t *testing.T) {
	run := func(cfg *config.Config, args ...string) (*Options, error) {
		ios, _, _ := cmdutil.Test()
		f := &cmdutil.Factory{IO: ios, Config: cfg}
		var got *Options
		cmd := NewCmdSurvey(f, func(_ context.Context, o *Options) error { got = o; applyConfig(o); return nil })
		cmd.SetArgs(args)
		cmd.SetOut(ios.Out)
		cmd.SetErr(ios.ErrOut)
		return got, cmd.ExecuteContext(context.Background())
	}
	cfg, err := cmdutil.ParseConfig([]byte("survey:\n  spacing: 250ms\n  timeout: 2s\n  allow_cross_private: true\n" +
		"  max_bytes: {wwan0: 50MB, wlan0: 1GB}\n  rate: 42\n  list: l.csv\n"))
	require.NoError(t, err)
	o, err := run(cfg, "--rate", "7")
	require.NoError(t, err)
	assert.Equal(t, 250*time.Millisecond, o.Spacing)
	assert.Equal(t, 2*time.Second, o.Timeout)
	assert.True(t, o.AllowCrossPrivate)
	assert.Equal(t, []string{"wlan0=1GB", "wwan0=50MB"}, o.MaxBytes)
	assert.Equal(t, 7.0, o.Rate, "the flag overrides the config")
	assert.Equal(t, "l.csv", o.List)

	// A flag overrides the config even where the two exclude each other.
	o, err = run(cfg, "--list-id", "latest")
	require.NoError(t, err)
	assert.Empty(t, o.List)
	assert.Equal(t, "latest", o.ListID)

	_, err = cmdutil.ParseConfig([]byte("survey:\n  spacing: soon\n"))
	assert.ErrorContains(t, err, "config line 2: survey.spacing")
}

// failAfter accepts n bytes, then fails every write (a disk filling up).
type failAfter struct{ n int }

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		return 0, errors.New("no space left on device")
	}
	f.n -= len(p)
	return len(p), nil
}

// A write error on the output outranks a partial run: the exit is an
// error naming the write, never exit 3 with records silently lost.
func TestSurveyCommandWriteErrorIsAnError(t *testing.T) {
	list := filepath.Join(t.TempDir(), "list.csv")
	require.NoError(t, os.WriteFile(list, []byte("1,a.test\n"), 0o644))
	args := []string{"--list", list, "--paths", "lo", "--method", "tcp-connect", "--family", "4"}
	whole, _, err := runCLI(t, args...)
	require.ErrorIs(t, err, cmdutil.ErrPartial)
	require.Contains(t, whole, `"type":"summary"`)
	ios, _, errOut := cmdutil.Test()
	// The header fits, the summary and the trailer do not.
	ios.Out = &failAfter{n: strings.Index(whole, "\n") + 1}
	f := &cmdutil.Factory{IO: ios, Logger: slog.New(slog.NewTextHandler(errOut, nil))}
	cmd := NewCmdSurvey(f, nil)
	cmd.SetArgs(args)
	err = cmd.ExecuteContext(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "write output: no space left")
	assert.Equal(t, cmdutil.ExitError, cmdutil.ExitCode(err))
}

// The README's first survey example, as typed: no list named, so today's
// Tranco list (here from a local stub service named by the config, as a
// mirror would be), downloaded once and cached; its id, date and sha256 go
// into the header. Offline, the cached list is used; offline without one,
// exit 2 naming the URL and --list FILE, and no output file.
func TestSurveyTopAsTyped(t *testing.T) {
	var body strings.Builder
	body.WriteString("1,a.test\n2,b.test\n")
	for i := 3; i <= 12000; i++ {
		fmt.Fprintf(&body, "%d,n%d.test\n", i, i)
	}
	var downloads atomic.Int32
	tranco := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/top-1m-id":
			fmt.Fprintln(w, "X5Q2N")
		case "/api/lists/id/X5Q2N":
			fmt.Fprint(w, `{"list_id": "X5Q2N", "created_on": "2026-11-26T00:00:00"}`)
		case "/download/X5Q2N/1000000":
			downloads.Add(1)
			fmt.Fprint(w, body.String())
		default:
			http.NotFound(w, r)
		}
	}))
	defer tranco.Close()
	require.True(t, strings.HasPrefix(tranco.URL, "http://127.0.0.1:"), "loopback only")
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	dir := t.TempDir()
	cfgFor := func(base, cache string) *config.Config {
		cfg, err := cmdutil.ParseConfig([]byte(fmt.Sprintf("dns: {lo: [%q]}\nsurvey:\n  tranco_url: %s\n  cache_dir: %s\n"+
			"  paths: [lo]\n  family: \"4\"\n  method: tcp-connect\n  port: %d\n  count: 1\n  rate: 1000\n  spacing: 1ms\n",
			startDNS(t), base, cache, ln.Addr().(*net.TCPAddr).Port)))
		require.NoError(t, err)
		return cfg
	}
	run := func(cfg *config.Config, args ...string) (string, error) {
		ios, _, errOut := cmdutil.Test()
		f := &cmdutil.Factory{IO: ios, Config: cfg, Logger: slog.New(slog.NewTextHandler(errOut, nil))}
		cmd := NewCmdSurvey(f, nil)
		cmd.SilenceUsage = true
		cmd.SetArgs(args)
		err := cmd.ExecuteContext(context.Background())
		return errOut.String(), err
	}
	header := func(path string) map[string]any {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NoError(t, report.ValidateStream(bytes.NewReader(b)))
		var h struct{ Config struct{ List map[string]any } }
		require.NoError(t, json.Unmarshal(b[:bytes.IndexByte(b, '\n')], &h))
		return h.Config.List
	}
	cache := filepath.Join(dir, "cache")
	out := filepath.Join(dir, "survey.jsonl")
	stderr, err := run(cfgFor(tranco.URL, cache), "--top", "10000", "-o", out)
	require.NoError(t, err, stderr)
	sum := fmt.Sprintf("%x", sha256.Sum256([]byte(body.String())))
	list := header(out)
	assert.Equal(t, "tranco", list["source"])
	assert.Equal(t, "X5Q2N", list["id"])
	assert.Equal(t, "2026-11-26", list["date"])
	assert.Equal(t, sum, list["sha256"])
	assert.EqualValues(t, 10000, list["domains"])
	assert.Contains(t, stderr, "Tranco list X5Q2N (2026-11-26, sha256 "+sum+") downloaded to "+filepath.Join(cache, "tranco-X5Q2N.csv"))

	// Offline the same day: the cached list, nothing downloaded.
	tranco.Close()
	out2 := filepath.Join(dir, "again.jsonl")
	stderr, err = run(cfgFor(tranco.URL, cache), "--top", "10000", "-o", out2)
	require.NoError(t, err, stderr)
	assert.Contains(t, stderr, "cached in")
	assert.Equal(t, list, header(out2))
	assert.EqualValues(t, 1, downloads.Load())

	// Offline with nothing cached: one line, exit 2, no output.
	out3 := filepath.Join(dir, "offline.jsonl")
	_, err = run(cfgFor(tranco.URL, filepath.Join(dir, "empty")), "--top", "10000", "-o", out3)
	require.Error(t, err)
	assert.Equal(t, cmdutil.ExitUsage, cmdutil.ExitCode(err))
	assert.Contains(t, err.Error(), tranco.URL+"/top-1m-id")
	assert.Contains(t, err.Error(), "--list FILE")
	assert.NotContains(t, err.Error(), "\n")
	assert.NoFileExists(t, out3)
	// --tranco-url overrides the config.
	_, err = run(cfgFor(tranco.URL, filepath.Join(dir, "empty")), "--tranco-url", "http://127.0.0.1:9/mirror", "-o", out3)
	assert.ErrorContains(t, err, "http://127.0.0.1:9/mirror/top-1m-id")
}
