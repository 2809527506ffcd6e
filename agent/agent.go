// Package agent runs a probe's fleet schedule: it fetches the schedule
// from the collect server (ETag; the last good copy is kept for offline
// periods), runs the measurements that are due one at a time (two at once
// would disturb each other), and uploads.
package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mptester/mptester/agent/caps"
	"github.com/mptester/mptester/collect/api"
	"github.com/mptester/mptester/internal/fsutil"
	"github.com/mptester/mptester/upload"
)

// Agent is one probe's scheduler. Exec runs one measurement to its end
// with the arguments Argv built from the checked task; Upload drains the
// spool under the schedule's upload policy (its Path).
type Agent struct {
	URL   string
	Token string
	Probe string
	HTTP  *http.Client
	Dir   string // schedule.json, state.json, budget.json, agent.lock
	// Caps are the owner's limits every task is checked against, however
	// it reached the agent (from the server or the cached copy).
	Caps caps.Caps
	// Spool is where results land: the data budget counts the bytes they
	// record (nil: no counting).
	Spool *upload.Spool
	// Resolve looks up a run's server names for the private-target check
	// (default: the system resolver); Local lists this host's subnets.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	Local   func() []netip.Prefix
	Exec    func(ctx context.Context, t api.Task, args []string) error
	Upload  func(ctx context.Context, p api.UploadPolicy) error
	Logger  *slog.Logger
	Now     func() time.Time
	// Jitter returns a uniform duration in [0, d) (tests fix it).
	Jitter func(d time.Duration) time.Duration
	// UploadPath is the owner's upload.path ("" any): a schedule's upload
	// policy may name it, or one of Caps.Paths.
	UploadPath string
	// Meter returns the bytes (received and sent) each named interface
	// has counted so far (default: the kernel's counters).
	Meter func(names []string) ([]int64, error)

	// fetchErr is the last schedule fetch's error (a redirect is reported).
	fetchErr error
}

// ErrBusy: another agent is measuring on this probe.
var ErrBusy = errors.New("another agent is running")

// cached is the last good schedule as the server sent it; it is checked
// again (schema and caps) every time it is used.
type cached struct {
	ETag     string          `json:"etag"`
	Schedule json.RawMessage `json:"schedule"`
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
// or answers an error. A new revision is logged. Tasks that fail the
// schedule's checks come back as refusals.
func (a *Agent) Fetch(ctx context.Context) (api.Schedule, []*api.FieldError, error) {
	var c cached
	path := filepath.Join(a.Dir, "schedule.json")
	if b, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(b, &c)
	}
	have := c.ETag != "" && len(c.Schedule) > 0
	fresh, err := a.get(ctx, c.ETag)
	a.fetchErr = err
	switch {
	case err != nil && have:
		a.log().Warn("schedule server unreachable; using the last good copy", "etag", c.ETag, "err", err)
	case err != nil:
		return api.Schedule{}, nil, err
	case fresh == nil: // 304
	default:
		if fresh.ETag != c.ETag {
			a.log().Info("schedule changed", "etag", fresh.ETag, "previous", c.ETag)
		}
		b, _ := json.Marshal(fresh)
		if err := fsutil.WriteFileAtomic(path, b, 0o600); err != nil {
			return api.Schedule{}, nil, err
		}
		c = *fresh
	}
	s, bad, err := api.ParseScheduleTasks(c.Schedule)
	if err != nil {
		return api.Schedule{}, nil, fmt.Errorf("cached schedule: %w", err)
	}
	if fresh != nil {
		a.log().Info("schedule", "revision", s.Revision, "tasks", len(s.Tasks)+len(bad))
	}
	return s, bad, nil
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
	resp, err := a.client().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusNotModified:
		return nil, nil
	case http.StatusOK:
	default:
		return nil, fmt.Errorf("schedule: server answered %d: %s", resp.StatusCode, upload.CollectorText(b, 512))
	}
	if !json.Valid(b) {
		return nil, errors.New("schedule: the server's answer is not JSON")
	}
	return &cached{ETag: resp.Header.Get("ETag"), Schedule: b}, nil
}

// client reaches the collector only at a.URL: no redirect, no other
// origin (upload.Guard).
func (a *Agent) client() *http.Client {
	return upload.Guard(a.HTTP, a.URL)
}

// misdirected is the refusal that reports a collector's redirect (what
// names the part that was redirected: schedule, upload).
func misdirected(what string, err error, rev int64, now time.Time) (api.Refusal, bool) {
	if !upload.IsMisdirected(err) {
		return api.Refusal{}, false
	}
	return api.Refusal{Task: what, Revision: rev, Reason: what + ": " + err.Error(), At: now}, true
}

// state is when each task is next due, when the spool was last uploaded
// (the upload policy's Every counts from it), and the tasks not run for
// the current schedule (reported to the server with the next upload).
type state struct {
	Next       map[string]time.Time   `json:"next"`
	LastUpload time.Time              `json:"last_upload,omitzero"`
	Refused    map[string]api.Refusal `json:"refused,omitempty"`
	Reported   bool                   `json:"reported,omitempty"`
	// Serial is the highest serial of a signed schedule that ran.
	Serial int64 `json:"serial,omitempty"`
}

// RunOnce runs every task that is due now, one after the other, then
// uploads; the cron form (`agent --once`). It returns the tasks it ran.
// A task that fails the schedule's checks or the owner's caps is refused;
// one the data budget cannot carry is skipped until it can: both are
// logged and reported with the next upload.
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
	sched, bad, err := a.Fetch(ctx)
	if err != nil {
		// Still say what this probe accepts: the collector checks the
		// first schedule against these caps.
		if a.Upload != nil {
			var why map[string]api.Refusal
			if r, ok := misdirected("schedule", a.fetchErr, 0, a.now()); ok {
				why = map[string]api.Refusal{r.Task: r}
			}
			if rerr := a.report(ctx, why); rerr != nil {
				a.log().Debug("status report", "err", rerr)
			}
			// Results measured before are sent all the same: the
			// collector may take uploads while it has no schedule for
			// this probe (404) or cannot serve one.
			if ctx.Err() == nil {
				bud := a.loadBudget()
				if uerr := a.upload(ctx, api.UploadPolicy{}, &bud); uerr != nil {
					err = errors.Join(err, uerr)
				}
			}
		}
		return nil, fmt.Errorf("no schedule yet: %w", err)
	}
	st := state{Next: map[string]time.Time{}}
	statePath := filepath.Join(a.Dir, "state.json")
	if b, err := os.ReadFile(statePath); err == nil {
		_ = json.Unmarshal(b, &st)
	}
	now := a.now()
	refused := map[string]api.Refusal{}
	refuse := func(task, reason string, budget bool) {
		r := api.Refusal{Task: task, Revision: sched.Revision, Reason: reason, At: now, Budget: budget}
		if old, ok := st.Refused[task]; !ok || old.Reason != r.Reason || old.Revision != r.Revision {
			st.Reported = false
			a.log().Warn("task refused", "task", task, "revision", sched.Revision, "reason", reason, "budget", budget)
		} else {
			r.At = old.At
		}
		refused[task] = r
	}
	if r, ok := misdirected("schedule", a.fetchErr, sched.Revision, now); ok {
		refuse(r.Task, r.Reason, false) // running the last good copy
	}
	for _, fe := range bad {
		name := fe.Task
		if name == "" {
			name = fe.Field
		}
		refuse(name, fe.Error(), false)
	}
	if why := a.Caps.CheckSigned(sched, a.Probe, st.Serial); why != "" {
		// Nothing of an unverified schedule applies, its upload policy
		// included.
		for _, t := range sched.Tasks {
			refuse(t.Name, why, false)
		}
		if len(sched.Tasks) == 0 {
			refuse("schedule", why, false)
		}
		sched.Tasks, sched.Upload = nil, api.UploadPolicy{}
	} else if len(a.Caps.ScheduleKey) > 0 {
		st.Serial = max(st.Serial, sched.Serial)
	}
	next := map[string]time.Time{}
	bud := a.loadBudget()
	var ran []string
	var errs []error
	for _, t := range sched.Tasks {
		if err := a.Caps.Check(t); err != nil {
			refuse(t.Name, err.Error(), false)
			continue
		}
		due, ok := st.Next[t.Name]
		if !ok {
			due = now.Add(a.jitter(time.Duration(t.Spread))) // a new task: first run within its spread
		}
		next[t.Name] = due
		if old, ok := st.Refused[t.Name]; ok && old.Budget && old.Revision == sched.Revision {
			refused[t.Name] = old // still waiting for its budget
		}
		if now.Before(due) || !t.InWindows(now) || ctx.Err() != nil {
			continue
		}
		if err := a.checkTargets(ctx, t); err != nil {
			refuse(t.Name, err.Error(), false)
			continue
		}
		left, why := a.checkBudget(t, bud, now)
		if why != "" {
			refuse(t.Name, why, true)
			next[t.Name] = a.now().Add(time.Duration(t.Every) + a.jitter(time.Duration(t.Spread)))
			continue
		}
		delete(refused, t.Name)
		args, err := Argv(t, a.Caps, a.Dir, left)
		if err != nil {
			return ran, err
		}
		a.log().Info("running", "task", t.Name, "type", t.Type, "revision", sched.Revision)
		before := spooled(a.Spool)
		metered, err := a.exec(ctx, t, args, left)
		if errors.Is(err, ErrCut) {
			// Reported like a refusal: the collector asked for more time
			// or bytes than the owner gives a task.
			refuse(t.Name, err.Error(), errors.Is(err, ErrBudgetCut))
		} else if err != nil {
			errs = append(errs, fmt.Errorf("task %s: %w", t.Name, err))
		}
		ran = append(ran, t.Name)
		if len(a.Caps.Budget) > 0 {
			// What the results record, or what the interface counted
			// while the task ran when that is more.
			used := recordedBytes(a.Spool, before)
			for p, n := range metered {
				used[p] = max(used[p], n)
			}
			if err := a.spend(&bud, used); err != nil {
				return ran, err
			}
		}
		next[t.Name] = a.now().Add(time.Duration(t.Every) + a.jitter(time.Duration(t.Spread)))
		b, _ := json.Marshal(state{Next: next, LastUpload: st.LastUpload, Refused: st.Refused, Reported: st.Reported, Serial: st.Serial})
		if err := fsutil.WriteFileAtomic(statePath, b, 0o600); err != nil {
			return ran, err
		}
	}
	policy := sched.Upload
	if why := a.checkUploadPath(policy.Path); why != "" {
		refuse("upload", why, false)
		policy.Path = "" // the owner's upload.path
	}
	for name := range st.Refused {
		if _, ok := refused[name]; !ok {
			st.Reported = false // a refusal went away: say so too
		}
	}
	st.Next, st.Refused = next, refused
	if a.Upload != nil && ctx.Err() == nil && sched.Upload.Due(a.now(), st.LastUpload) {
		if !st.Reported {
			if err := a.report(ctx, st.Refused); err != nil {
				a.log().Warn("status report", "err", err)
			} else {
				st.Reported = true
			}
		}
		// Only a drained spool restarts Every: a failed upload (an outage)
		// is tried again at the next pass.
		err := a.upload(ctx, policy, &bud)
		if err != nil {
			errs = append(errs, err)
			if r, ok := misdirected("upload", err, sched.Revision, a.now()); ok {
				// Reported now: the next pass starts from the tasks again.
				a.log().Warn("upload refused", "reason", r.Reason)
				st.Refused[r.Task] = r
				if rerr := a.report(ctx, st.Refused); rerr != nil {
					a.log().Warn("status report", "err", rerr)
				}
				delete(st.Refused, r.Task)
				st.Reported = false
			}
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

// ErrCut: a task ran until the owner's max_duration, or until a path's
// data budget was spent, and was ended.
var ErrCut = errors.New("task cut")

// ErrBudgetCut: the cut was the data budget's.
var ErrBudgetCut = fmt.Errorf("%w at the data budget", ErrCut)

// exec runs t for at most the owner's max_duration and, on each budgeted
// path in left, until the interface counted the bytes left: Exec ends the
// command (its process group) when the context it is given is done. It
// returns the bytes each of those interfaces counted meanwhile.
func (a *Agent) exec(ctx context.Context, t api.Task, args []string, left map[string]int64) (map[string]int64, error) {
	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	limit := time.Duration(a.Caps.MaxDuration)
	if limit > 0 {
		var stop context.CancelFunc
		tctx, stop = context.WithTimeout(tctx, limit)
		defer stop()
	}
	m := a.startMeter(left, func(err error) { cancel(err) })
	err := a.Exec(tctx, t, args)
	metered := m.stop()
	switch cause := context.Cause(tctx); {
	case ctx.Err() != nil:
	case errors.Is(cause, ErrBudgetCut):
		a.log().Warn("task cut at the data budget", "task", t.Name, "reason", cause)
		return metered, cause
	case errors.Is(tctx.Err(), context.DeadlineExceeded):
		a.log().Warn("task cut at max_duration", "task", t.Name, "max_duration", limit)
		return metered, fmt.Errorf("%w at max_duration %v (this probe owner's cap on a task's wall time); what it measured until then is spooled", ErrCut, limit)
	}
	return metered, err
}

// upload drains the spool under p; the bytes each budgeted interface
// counted meanwhile are spent from its budget (the upload's path, or
// whatever the route chose).
func (a *Agent) upload(ctx context.Context, p api.UploadPolicy, bud *budget) error {
	all := map[string]int64{}
	for name := range a.Caps.Budget {
		all[name] = math.MaxInt64 // counted, never cut
	}
	m := a.startMeter(all, func(error) {})
	err := a.Upload(ctx, p)
	if used := m.stop(); len(used) > 0 {
		if serr := a.spend(bud, used); serr != nil {
			return errors.Join(err, serr)
		}
	}
	return err
}

// checkUploadPath says why a schedule may not bind uploads to path ("" if
// it may): only the owner's upload.path, one of the owner's paths, or,
// when the owner listed none, a path without a data budget.
func (a *Agent) checkUploadPath(path string) string {
	switch {
	case path == "" || path == a.UploadPath:
		return ""
	case len(a.Caps.Paths) > 0 && !slices.Contains(a.Caps.Paths, path):
		return fmt.Sprintf("upload.path %s is not one of this probe owner's paths (%s); uploads use the owner's upload.path", path, strings.Join(a.Caps.Paths, ", "))
	case len(a.Caps.Paths) == 0 && a.Caps.Budget[path] > 0:
		return fmt.Sprintf("upload.path %s has a data budget and is not the owner's upload.path; uploads use the owner's upload.path", path)
	}
	return ""
}

// checkTargets resolves a run's server names and refuses private or local
// addresses (the schema and caps already refused such literals).
func (a *Agent) checkTargets(ctx context.Context, t api.Task) error {
	if t.Run == nil || a.Caps.AllowPrivate {
		return nil
	}
	var local []netip.Prefix
	if a.Local != nil {
		local = a.Local()
	}
	resolve := a.Resolve
	if resolve == nil {
		resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	for _, s := range t.Run.Servers {
		host := caps.HostOf(s)
		addrs, err := resolve(ctx, host)
		if err != nil {
			// Fail closed: a name that cannot be checked is not run (the
			// run checks again at each dial in any case).
			return &api.FieldError{Task: t.Name, Field: t.Type, Reason: fmt.Sprintf("target %s could not be resolved to check it: %v", host, err)}
		}
		if err := a.Caps.CheckAddrs(t, host, addrs, local...); err != nil {
			return err
		}
	}
	return nil
}

// Status is what the agent reports about itself: its owner's caps and the
// tasks of the current schedule it did not run.
type Status struct {
	Caps     caps.Caps     `json:"caps"`
	Refusals []api.Refusal `json:"refusals"`
}

// report sends the status to the server (PUT /v1/probes/{probe}/status).
func (a *Agent) report(ctx context.Context, refused map[string]api.Refusal) error {
	st := Status{Caps: a.Caps, Refusals: []api.Refusal{}}
	for _, name := range sortedKeys(refused) {
		st.Refusals = append(st.Refusals, refused[name])
	}
	b, _ := json.Marshal(st)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, strings.TrimRight(a.URL, "/")+"/v1/probes/"+a.Probe+"/status", bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("status: server answered %d: %s", resp.StatusCode, upload.CollectorText(msg, 512))
	}
	return nil
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
