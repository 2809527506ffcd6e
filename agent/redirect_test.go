package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/agent/caps"
	"github.com/mptester/mptester/collect/api"
	"github.com/mptester/mptester/upload"
)

// hostile is a pinned HTTPS collector that redirects the schedule fetch
// and the uploads to where redirect says; it keeps the status reports.
type hostile struct {
	url      string
	pin      [32]byte
	redirect atomic.Value // string; "" serves a schedule
	schedule string       // the schedule served (default: one survey task)
	mu       sync.Mutex
	reports  []Status
}

func newHostile(t *testing.T) *hostile {
	h := &hostile{}
	h.redirect.Store("")
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/status"):
			var st Status
			_ = json.NewDecoder(r.Body).Decode(&st)
			h.mu.Lock()
			h.reports = append(h.reports, st)
			h.mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		case h.redirect.Load().(string) != "":
			http.Redirect(w, r, h.redirect.Load().(string), http.StatusFound)
		case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, api.RunsPath):
			b, _ := io.ReadAll(r.Body)
			sum := sha256.Sum256(b)
			_ = json.NewEncoder(w).Encode(api.Receipt{RunID: strings.TrimPrefix(r.URL.Path, api.RunsPath), SHA256: hex.EncodeToString(sum[:])})
		default:
			w.Header().Set("ETag", `"1"`)
			if h.schedule != "" {
				io.WriteString(w, h.schedule)
				return
			}
			io.WriteString(w, `{"revision":1,"tasks":[{"name":"s","type":"survey","every":"1h"}]}`)
		}
	}))
	t.Cleanup(ts.Close)
	h.url, h.pin = ts.URL, sha256.Sum256(ts.Certificate().Raw)
	return h
}

func (h *hostile) lastReport() Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.reports) == 0 {
		return Status{}
	}
	return h.reports[len(h.reports)-1]
}

// sink is a plain HTTP service on the probe's loopback: it counts the
// connections it accepts and the tokens it is sent.
type sink struct {
	addr   string
	conns  atomic.Int32
	tokens atomic.Int32
}

func newSink(t *testing.T) *sink {
	s := &sink{}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			s.tokens.Add(1)
		}
		io.WriteString(w, `{"revision":9,"tasks":[{"name":"evil","type":"survey","every":"1h"}]}`)
	}))
	ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	s.addr = ts.Listener.Addr().String()
	return s
}

// TestCollectorRedirects: a pinned collector that redirects the schedule
// fetch or an upload (to plain HTTP on its own host, to the probe's
// loopback, to a private or a metadata address) gets no request followed:
// no connection anywhere but the collector, no token sent, nothing taken
// as the schedule, and the redirect, its Location named, is reported to
// the collector.
func TestCollectorRedirects(t *testing.T) {
	h := newHostile(t)
	lo := newSink(t)
	collector := strings.TrimPrefix(h.url, "https://")
	_, port, _ := net.SplitHostPort(collector)
	var dialMu sync.Mutex
	var dialed []string
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialMu.Lock()
		dialed = append(dialed, addr)
		dialMu.Unlock()
		if addr != collector {
			return nil, &net.OpError{Op: "dial", Net: network, Err: os.ErrPermission} // counted, never sent
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	hc := &http.Client{Transport: upload.Transport(&h.pin, dial), Timeout: 10 * time.Second}

	targets := []string{
		"http://" + net.JoinHostPort("127.0.0.1", port) + "/v1/probes/pi1/config", // plain HTTP, same host
		"http://" + lo.addr + "/v1/probes/pi1/config",                             // the probe's loopback
		"http://10.0.0.1/", "http://169.254.169.254/latest/meta-data/",
		"https://" + lo.addr + "/", // another origin, even over TLS
	}
	for _, target := range targets {
		t.Run(target, func(t *testing.T) {
			dir := t.TempDir()
			sp, err := upload.OpenSpool(filepath.Join(dir, "spool"), upload.Quota{})
			require.NoError(t, err)
			e, err := sp.Create("r1", ".jsonl")
			require.NoError(t, err)
			_, _ = e.Write([]byte(`{"type":"summary"}` + "\n"))
			require.NoError(t, e.Commit())
			var ran []string
			a := &Agent{URL: h.url, Token: strings.Repeat("ab", 32), Probe: "pi1", Dir: filepath.Join(dir, "state"), HTTP: hc,
				Caps: caps.Defaults(), Jitter: func(time.Duration) time.Duration { return 0 },
				Exec: func(_ context.Context, task api.Task, _ []string) error { ran = append(ran, task.Name); return nil },
				Upload: func(ctx context.Context, _ api.UploadPolicy) error {
					c := &upload.Client{URL: h.url, Token: strings.Repeat("ab", 32), HTTP: hc, Compression: upload.CompressNone, Backoff: upload.Backoff{Attempts: 3}}
					_, err := c.Drain(ctx, sp)
					return err
				}}
			ctx := context.Background()

			// No schedule yet: the redirected fetch is an error naming the
			// Location, reported.
			h.redirect.Store(target)
			_, err = a.RunOnce(ctx)
			var re *upload.RedirectError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, target, re.Location)
			assert.Empty(t, ran)
			rep := h.lastReport()
			require.Len(t, rep.Refusals, 1)
			assert.Equal(t, "schedule", rep.Refusals[0].Task)
			assert.Contains(t, rep.Refusals[0].Reason, target)

			// A good schedule, then a redirect again: the last good copy
			// runs, the redirect is reported, and the redirected upload is
			// refused (one try, not retried) and reported too.
			h.redirect.Store("")
			_, err = a.RunOnce(ctx)
			require.NoError(t, err, "the collector serves the schedule; the upload is not redirected yet")
			items, err := sp.Pending()
			require.NoError(t, err)
			require.Empty(t, items, "uploaded")
			h.redirect.Store(target)
			e, err = sp.Create("r2", ".jsonl")
			require.NoError(t, err)
			require.NoError(t, e.Commit())
			require.NoError(t, os.Remove(filepath.Join(a.Dir, "state.json"))) // due again
			_, err = a.RunOnce(ctx)
			require.ErrorAs(t, err, &re)
			assert.Equal(t, []string{"s", "s"}, ran)
			rep = h.lastReport()
			var tasks []string
			for _, r := range rep.Refusals {
				tasks = append(tasks, r.Task)
				assert.Contains(t, r.Reason, target)
			}
			assert.ElementsMatch(t, []string{"schedule", "upload"}, tasks)
			items, err = sp.Pending()
			require.NoError(t, err)
			assert.Len(t, items, 1, "the redirected upload stays in the spool")

			assert.Zero(t, lo.conns.Load(), "no connection to the probe's loopback service")
			assert.Zero(t, lo.tokens.Load(), "no token sent")
			dialMu.Lock()
			for _, d := range dialed {
				assert.Equal(t, collector, d, "dialed only the collector")
			}
			dialMu.Unlock()
		})
	}
}

// TestCollectorTextEscaped: a collector's error body reaches the log and
// the terminal quoted and cut, never raw (no forged line, no escape).
func TestCollectorTextEscaped(t *testing.T) {
	body := "\x1b]0;owned\x07\x1b[2J\nlevel=INFO msg=forged" + strings.Repeat("x", 4000)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, body)
	}))
	defer ts.Close()
	a := &Agent{URL: ts.URL, Token: "t", Probe: "pi1", Dir: t.TempDir(), Caps: caps.Defaults()}
	_, err := a.RunOnce(context.Background())
	require.Error(t, err)
	msg := err.Error()
	assert.NotContains(t, msg, "\x1b")
	assert.NotContains(t, msg, "\n")
	assert.Contains(t, msg, `\x1b]0;owned\a`)
	assert.Less(t, len(msg), 1000)
}

// TestRunTargetsFailClosed: a run's server name that cannot be resolved
// for the check is refused (never a pass), and a run task that passes
// carries --no-private with the owner's public prefixes, so the run checks
// again at each dial.
func TestRunTargetsFailClosed(t *testing.T) {
	task := api.Task{Name: "r", Type: api.TypeRun, Run: &api.RunParams{Servers: []string{"rebind.example:8443"}}}
	a := &Agent{Caps: caps.Defaults(), Resolve: func(context.Context, string) ([]netip.Addr, error) {
		return nil, &net.DNSError{Err: "server misbehaving", Name: "rebind.example", IsTemporary: true}
	}}
	err := a.checkTargets(context.Background(), task)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "rebind.example could not be resolved")

	c := caps.Defaults()
	c.Public = []netip.Prefix{netip.MustParsePrefix("198.19.0.0/17")}
	args, err := Argv(task, c, t.TempDir(), nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"run", "--server", "rebind.example:8443", "--no-private", "--public-prefix", "198.19.0.0/17", "--no-upload"}, args)
	c.AllowPrivate = true
	args, err = Argv(task, c, t.TempDir(), nil)
	require.NoError(t, err)
	assert.NotContains(t, args, "--no-private")
}

// TestTaskCutAtMaxDuration: a task still running at the owner's
// max_duration is ended (its context done) and the cut is reported to the
// collector as that task's refusal.
func TestTaskCutAtMaxDuration(t *testing.T) {
	h := newHostile(t)
	c := caps.Defaults()
	c.MaxDuration = api.Duration(50 * time.Millisecond)
	a := &Agent{URL: h.url, Token: "t", Probe: "pi1", Dir: t.TempDir(), Caps: c, Jitter: func(time.Duration) time.Duration { return 0 },
		HTTP: &http.Client{Transport: upload.Transport(&h.pin, nil)},
		Exec: func(ctx context.Context, _ api.Task, _ []string) error {
			<-ctx.Done() // a task that would run forever
			return ctx.Err()
		},
		Upload: func(context.Context, api.UploadPolicy) error { return nil }}
	ran, err := a.RunOnce(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"s"}, ran)
	rep := h.lastReport()
	require.Len(t, rep.Refusals, 1)
	assert.Equal(t, "s", rep.Refusals[0].Task)
	assert.Contains(t, rep.Refusals[0].Reason, "cut at max_duration 50ms")
}
