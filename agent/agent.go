// Package agent runs a probe's fleet schedule: it fetches the schedule
// from the collect server (ETag; the last good copy is kept for offline
// periods), runs the measurements that are due one at a time (two at once
// would disturb each other), and uploads.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mptester/mptester/collect/api"
	"github.com/mptester/mptester/internal/fsutil"
	"github.com/mptester/mptester/upload"
)

// Agent is one probe's scheduler. Exec runs one measurement to its end;
// Upload drains the spool under the schedule's upload policy (its Path).
type Agent struct {
	URL    string
	Token  string
	Probe  string
	HTTP   *http.Client
	Dir    string // schedule.json, state.json, agent.lock
	Exec   func(ctx context.Context, t api.Task) error
	Upload func(ctx context.Context, p api.UploadPolicy) error
	Logger *slog.Logger
	Now    func() time.Time
	// Jitter returns a uniform duration in [0, d) (tests fix it).
	Jitter func(d time.Duration) time.Duration
}

// ErrBusy: another agent is measuring on this probe.
var ErrBusy = errors.New("another agent is running")

type cached struct {
	ETag     string       `json:"etag"`
	Schedule api.Schedule `json:"schedule"`
}

func (a *Agent) log() *slog.Logger {
	if a.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.Logger
}

func (a *Agent) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func (a *Agent) jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	if a.Jitter != nil {
		return a.Jitter(d)
	}
	return rand.N(d)
}

// Fetch returns the current schedule: the server's (If-None-Match with
// the cached ETag), or the last good copy when the server is unreachable
// or answers an error. A new revision is logged.
func (a *Agent) Fetch(ctx context.Context) (api.Schedule, error) {
	var c cached
	path := filepath.Join(a.Dir, "schedule.json")
	if b, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(b, &c)
	}
	have := c.ETag != ""
	fresh, err := a.get(ctx, c.ETag)
	switch {
	case err != nil && have:
		a.log().Warn("schedule server unreachable; using the last good copy", "revision", c.Schedule.Revision, "err", err)
		return c.Schedule, nil
	case err != nil:
		return api.Schedule{}, err
	case fresh == nil:
		return c.Schedule, nil // 304
	}
	if fresh.ETag != c.ETag {
		a.log().Info("schedule changed", "revision", fresh.Schedule.Revision, "etag", fresh.ETag, "previous", c.ETag, "tasks", len(fresh.Schedule.Tasks))
	}
	b, _ := json.Marshal(fresh)
	if err := fsutil.WriteFileAtomic(path, b, 0o600); err != nil {
		return api.Schedule{}, err
	}
	return fresh.Schedule, nil
}

// get returns nil for 304.
func (a *Agent) get(ctx context.Context, etag string) (*cached, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(a.URL, "/")+"/v1/probes/"+a.Probe+"/config", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.Token)
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	hc := a.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusNotModified:
		return nil, nil
	case http.StatusOK:
	default:
		return nil, fmt.Errorf("schedule: server answered %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	s, err := api.ParseSchedule(b)
	if err != nil {
		return nil, err
	}
	return &cached{ETag: resp.Header.Get("ETag"), Schedule: s}, nil
}

// state is when each task is next due, and when the spool was last
// uploaded (the upload policy's Every counts from it).
type state struct {
	Next       map[string]time.Time `json:"next"`
	LastUpload time.Time            `json:"last_upload,omitzero"`
}

// RunOnce runs every task that is due now, one after the other, then
// uploads; the cron form (`agent --once`). It returns the tasks it ran.
func (a *Agent) RunOnce(ctx context.Context) ([]string, error) {
	if err := os.MkdirAll(a.Dir, 0o700); err != nil {
		return nil, err
	}
	unlock, err := upload.LockFile(filepath.Join(a.Dir, "agent.lock"))
	if errors.Is(err, upload.ErrLocked) {
		return nil, ErrBusy
	}
	if err != nil {
		return nil, err
	}
	defer unlock()
	sched, err := a.Fetch(ctx)
	if err != nil {
		return nil, fmt.Errorf("no schedule yet: %w", err)
	}
	st := state{Next: map[string]time.Time{}}
	statePath := filepath.Join(a.Dir, "state.json")
	if b, err := os.ReadFile(statePath); err == nil {
		_ = json.Unmarshal(b, &st)
	}
	next := map[string]time.Time{}
	now := a.now()
	var ran []string
	var errs []error
	for _, t := range sched.Tasks {
		due, ok := st.Next[t.Name]
		if !ok {
			due = now.Add(a.jitter(time.Duration(t.Spread))) // a new task: first run within its spread
		}
		next[t.Name] = due
		if now.Before(due) || !t.InWindows(now) || ctx.Err() != nil {
			continue
		}
		a.log().Info("running", "task", t.Name, "command", t.Command, "revision", sched.Revision)
		if err := a.Exec(ctx, t); err != nil {
			errs = append(errs, fmt.Errorf("task %s: %w", t.Name, err))
		}
		ran = append(ran, t.Name)
		next[t.Name] = a.now().Add(time.Duration(t.Every) + a.jitter(time.Duration(t.Spread)))
		b, _ := json.Marshal(state{Next: next, LastUpload: st.LastUpload})
		if err := fsutil.WriteFileAtomic(statePath, b, 0o600); err != nil {
			return ran, err
		}
	}
	st.Next = next
	if a.Upload != nil && ctx.Err() == nil && sched.Upload.Due(a.now(), st.LastUpload) {
		// Only a drained spool restarts Every: a failed upload (an outage)
		// is tried again at the next pass.
		if err := a.Upload(ctx, sched.Upload); err != nil {
			errs = append(errs, err)
		} else {
			st.LastUpload = a.now()
		}
	}
	b, _ := json.Marshal(st)
	if err := fsutil.WriteFileAtomic(statePath, b, 0o600); err != nil {
		return ran, err
	}
	return ran, errors.Join(errs...)
}

// NextDue is when the earliest task is due (zero if none), from the state.
func (a *Agent) NextDue() time.Time {
	var st state
	b, err := os.ReadFile(filepath.Join(a.Dir, "state.json"))
	if err != nil || json.Unmarshal(b, &st) != nil {
		return time.Time{}
	}
	var first time.Time
	for _, t := range st.Next {
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	return first
}
