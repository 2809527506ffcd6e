package agent

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/agent/caps"
	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/collect/api"
	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/upload"
)

type fleet struct {
	st              store.Store
	url, admin, tok string
	notModified     atomic.Int32
	down            atomic.Bool
}

// newFleet is a real collect server (SQLite) with probe pi1; down makes it
// refuse every request as an unreachable server would.
func newFleet(t *testing.T) *fleet {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "c.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	f := &fleet{st: st, admin: collect.NewToken(), tok: collect.NewToken()}
	require.NoError(t, st.AddProbe(ctx, "pi1", collect.HashToken(f.tok), time.Now()))
	require.NoError(t, st.AddAdmin(ctx, "ops", collect.HashToken(f.admin), time.Now()))
	srv, err := collect.New(collect.Config{Store: st, Data: filepath.Join(dir, "data"), Limits: collect.DefaultLimits()})
	require.NoError(t, err)
	h := srv.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.down.Load() {
			hj, _ := w.(http.Hijacker)
			c, _, _ := hj.Hijack()
			c.Close()
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code == http.StatusNotModified {
			f.notModified.Add(1)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(ts.Close)
	f.url = ts.URL
	return f
}

func (f *fleet) setSchedule(t *testing.T, probe, body string) {
	req, _ := http.NewRequest(http.MethodPut, f.url+"/v1/probes/"+probe+"/config", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+f.admin)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

const schedule = `{"tasks":[
 {"name":"survey","command":"survey","args":["--top","100"],"every":"6h","spread":"30m"},
 {"name":"patterns","command":"run","args":["--server","test.example"],"every":"1h"}]}`

// TestAgentSchedule: the first run measures every task (one at a time),
// the next only what is due; spread and windows are honoured; ETag gives
// 304s; a changed schedule is logged with its revision; offline, the last
// good copy is used.
func TestAgentSchedule(t *testing.T) {
	f := newFleet(t)
	f.setSchedule(t, "*", schedule)
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	var running atomic.Int32
	var ran []string
	var logs bytes.Buffer
	uploads := 0
	a := &Agent{URL: f.url, Token: f.tok, Probe: "pi1", Dir: t.TempDir(),
		Now:    func() time.Time { return now },
		Jitter: func(d time.Duration) time.Duration { return d / 2 },
		Caps:   caps.Defaults(),
		Resolve: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("9.9.9.9")}, nil // never contacted: Exec records
		},
		Exec: func(ctx context.Context, task api.Task, args []string) error {
			if running.Add(1) != 1 {
				t.Error("two measurements at once")
			}
			defer running.Add(-1)
			ran = append(ran, task.Name+" "+strings.Join(args, " "))
			return nil
		},
		Upload: func(context.Context, api.UploadPolicy) error { uploads++; return nil },
		Logger: slogTo(&logs)}
	ctx := context.Background()

	got, err := a.RunOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"patterns"}, got, "survey's first run is within its spread (15 min here)")
	assert.Contains(t, logs.String(), "schedule changed")
	assert.Contains(t, logs.String(), "revision=1")

	now = now.Add(16 * time.Minute)
	got, err = a.RunOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"survey"}, got)
	assert.Equal(t, int32(1), f.notModified.Load(), "unchanged schedule: 304")
	assert.Equal(t, 2, uploads)

	now = now.Add(50 * time.Minute) // patterns due at 13:00 (1h after 12:00)
	got, _ = a.RunOnce(ctx)
	assert.Equal(t, []string{"patterns"}, got)
	got, _ = a.RunOnce(ctx)
	assert.Empty(t, got, "nothing due twice")

	// Offline: the last good copy still runs.
	f.down.Store(true)
	now = now.Add(time.Hour)
	got, err = a.RunOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"patterns"}, got)
	assert.Contains(t, logs.String(), "last good copy")

	// A probe's own schedule overrides the fleet's; windows hold it back.
	f.down.Store(false)
	f.setSchedule(t, "pi1", `{"tasks":[{"name":"night","command":"survey","every":"24h","windows":["01:00-05:00"]}]}`)
	logs.Reset()
	got, _ = a.RunOnce(ctx)
	assert.Empty(t, got, "outside its window at 14:06")
	assert.Contains(t, logs.String(), "revision=1")
	now = time.Date(2026, 11, 24, 2, 0, 0, 0, time.UTC)
	got, _ = a.RunOnce(ctx)
	assert.Equal(t, []string{"night"}, got)
	assert.Equal(t, []string{"patterns run --server test.example --no-private --no-upload", "survey survey --top 100 --rate 100 --no-private --no-upload",
		"patterns run --server test.example --no-private --no-upload", "patterns run --server test.example --no-private --no-upload", "night survey --rate 100 --no-private --no-upload"}, ran,
		"the legacy args migrated to typed parameters; the agent built the argv")
}

func TestAgentLockAndBadSchedules(t *testing.T) {
	dir := t.TempDir()
	unlock, err := upload.LockFile(filepath.Join(dir, "agent.lock"))
	require.NoError(t, err)
	_, err = (&Agent{Dir: dir}).RunOnce(context.Background())
	assert.ErrorIs(t, err, ErrBusy)
	unlock()
	for _, bad := range []string{`{"tasks":[{"name":"x","command":"rm","every":"1h"}]}`, `{"tasks":[{"name":"x","command":"run","every":"1s"}]}`,
		`{"tasks":[{"name":"x","command":"run","every":"1h","windows":["25:00-26:00"]}]}`, `{"tasks":[{"command":"run","every":"1h"}]}`, `{"bogus":1}`} {
		_, err := api.ParseSchedule([]byte(bad))
		assert.Error(t, err, bad)
	}
	tk := api.Task{Windows: []string{"22:00-02:00"}}
	assert.True(t, tk.InWindows(time.Date(2026, 1, 1, 23, 0, 0, 0, time.UTC)))
	assert.True(t, tk.InWindows(time.Date(2026, 1, 1, 1, 59, 0, 0, time.UTC)))
	assert.False(t, tk.InWindows(time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)))
}

// TestAgentUploadPolicy: the schedule's upload policy spaces uploads by
// its every (counted from the last successful one), holds them outside its
// windows, and hands its path to the uploader.
func TestAgentUploadPolicy(t *testing.T) {
	f := newFleet(t)
	f.setSchedule(t, "*", `{"tasks":[{"name":"p","type":"survey","every":"1h"}],
	 "upload":{"every":"3h","windows":["00:00-20:00"],"path":"wlan0"}}`)
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	var uploads []string
	fail := false
	a := &Agent{URL: f.url, Token: f.tok, Probe: "pi1", Dir: t.TempDir(),
		Now:  func() time.Time { return now },
		Caps: caps.Defaults(),
		Exec: func(context.Context, api.Task, []string) error { return nil },
		Upload: func(_ context.Context, p api.UploadPolicy) error {
			uploads = append(uploads, now.Format("15:04")+" "+p.Path)
			if fail {
				return errors.New("uplink down")
			}
			return nil
		}}
	ctx := context.Background()
	for i := 0; i < 9; i++ { // 12:00 ... 20:00, one pass an hour
		fail = i == 3 // 15:00 fails: tried again at 16:00
		_, err := a.RunOnce(ctx)
		if fail {
			require.Error(t, err)
		}
		now = now.Add(time.Hour)
	}
	assert.Equal(t, []string{"12:00 wlan0", "15:00 wlan0", "16:00 wlan0", "19:00 wlan0"}, uploads,
		"every 3h from the last success, none at 20:00 (outside the window)")

	for bad, want := range map[string]string{`{"upload":{"every":"-1h"}}`: "schedule: upload.every:",
		`{"upload":{"windows":["25:00-01:00"]}}`: "schedule: upload.windows[0]:", `{"upload":{"path":"../etc"}}`: "schedule: upload.path: '../etc' does not match pattern",
		`{"upload":{"evry":"1h"}}`: `additional properties 'evry' not allowed`} {
		_, err := api.ParseSchedule([]byte(bad))
		assert.ErrorContains(t, err, want, bad)
	}
}

// TestOnceUploadsWithoutSchedule: with no schedule for this probe (404)
// the pass still uploads what earlier passes measured.
func TestOnceUploadsWithoutSchedule(t *testing.T) {
	f := newFleet(t)
	uploads := 0
	a := &Agent{URL: f.url, Token: f.tok, Probe: "pi1", Dir: t.TempDir(), Caps: caps.Defaults(),
		Upload: func(context.Context, api.UploadPolicy) error { uploads++; return nil }}
	_, err := a.RunOnce(context.Background())
	require.ErrorContains(t, err, "no schedule yet")
	assert.Equal(t, 1, uploads, "pending results uploaded")
}
