package collect

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/collect/storeinput"
	"github.com/mptester/mptester/report/analysis"
	"github.com/mptester/mptester/report/render"
)

// The fleet page: GET / shows the fleet to an admin in a browser. The
// admin token is entered once in a form; the browser keeps only a random
// session id (server-side, ending at logout, after 12 hours or when the
// admin is revoked) in a cookie the page's scripts cannot read
// (HttpOnly), sent only over HTTPS (Secure; browsers treat loopback as
// secure) and never from another site (SameSite=Strict); no token ever
// appears in a URL or a cookie. The cookie authenticates reads only
// (GET), so a forged form post from elsewhere can change nothing.

const (
	adminCookie    = "mptester_admin"
	adminCookieAge = 12 * time.Hour
	// failuresShown: the recent runs that did not end ok.
	failuresShown = 20
)

func (s *Server) fleetRoutes() {
	s.mux.HandleFunc("GET /{$}", s.handleFleetPage)
	s.mux.HandleFunc("POST /login", s.handleLogin)
	s.mux.HandleFunc("POST /logout", s.handleLogout)
}

// cookieAdmin is the admin token of a read request's cookie, if valid.
func (s *Server) cookieAdmin(r *http.Request) (store.Token, bool) {
	tok, ok, _ := s.cookieState(r)
	return tok, ok
}

// cookieState is cookieAdmin that also says when the cookie could not be
// checked because the store is unavailable.
func (s *Server) cookieState(r *http.Request) (tok store.Token, ok, unavailable bool) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return store.Token{}, false, false
	}
	c, err := r.Cookie(adminCookie)
	if err != nil || c.Value == "" {
		return store.Token{}, false, false
	}
	tok, err = s.cfg.Store.LookupSession(r.Context(), HashToken(c.Value), time.Now())
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Warn("fleet page: token lookup", "err", err)
		return store.Token{}, false, true
	}
	if err != nil || tok.Role != store.RoleAdmin {
		return store.Token{}, false, false
	}
	return tok, true, false
}

var loginPage = template.Must(template.New("login").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; form-action 'self'">
<title>mptester collect: sign in</title>
<style>
body { margin: 0 auto; max-width: 28rem; padding: 1rem; font: 15px/1.45 system-ui, sans-serif; }
input { width: 100%; font: inherit; padding: 0.4rem; margin: 0.3rem 0 0.8rem; box-sizing: border-box; }
button { font: inherit; padding: 0.4rem 1rem; }
.err { color: #b3261e; }
</style></head><body>
<h1>mptester fleet</h1>
{{if .}}<p class="err" id="error">{{.}}</p>{{end}}
<form method="post" action="/login">
<label for="token">Admin token (from <code>collect admin add</code>)</label>
<input id="token" name="token" type="password" autocomplete="current-password" required>
<button type="submit">Open the fleet page</button>
</form>
<p>This browser keeps a session for 12 hours (until you sign out); the token itself is never kept in a cookie or put in a URL.</p>
</body></html>
`))

func writeLogin(w http.ResponseWriter, code int, msg string) {
	var b bytes.Buffer
	_ = loginPage.Execute(&b, msg)
	pageHeaders(w)
	w.WriteHeader(code)
	_, _ = w.Write(b.Bytes())
}

func pageHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	securityHeaders(w)
}

// pageCSP is every HTML answer's policy, as an HTTP header (a <meta> tag
// cannot say frame-ancestors, and comes after what it should guard): the
// pages load nothing, run no script, post forms only here and are framed
// nowhere.
const pageCSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// securityHeaders are set on every HTML answer.
func securityHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Security-Policy", pageCSP)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Referrer-Policy", "no-referrer")
}

// handleLogin takes the admin token from the form and keeps it in the
// cookie; a probe's token or an unknown one is refused, saying which.
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil {
		writeLogin(w, http.StatusBadRequest, "The form could not be read.")
		return
	}
	raw := r.PostForm.Get("token")
	if raw == "" {
		writeLogin(w, http.StatusBadRequest, "Enter the admin token.")
		return
	}
	tok, err := s.cfg.Store.LookupToken(r.Context(), HashToken(raw))
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeLogin(w, http.StatusUnauthorized, "That is not a token of this collector.")
		return
	case err != nil:
		s.log.Error("token lookup", "err", err)
		writeLogin(w, http.StatusServiceUnavailable, "The store is unavailable; try again.")
		return
	case tok.Role != store.RoleAdmin:
		writeLogin(w, http.StatusForbidden, fmt.Sprintf("That is the token of probe %q: the fleet page needs an admin token.", tok.Name))
		return
	}
	// The cookie holds a random session id, never the token: it ends at
	// logout, after adminCookieAge, or when the admin is revoked.
	sid := NewToken()
	if err := s.cfg.Store.PutSession(r.Context(), HashToken(sid), tok.Hash, time.Now().Add(adminCookieAge)); err != nil {
		s.log.Error("session", "err", err)
		s.retryAfter(w)
		writeLogin(w, http.StatusServiceUnavailable, "The store is unavailable; try again.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: adminCookie, Value: sid, Path: "/", MaxAge: int(adminCookieAge.Seconds()),
		HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(adminCookie); err == nil && c.Value != "" {
		if err := s.cfg.Store.DeleteSession(r.Context(), HashToken(c.Value)); err != nil {
			s.log.Error("logout: session not ended", "err", err)
			s.retryAfter(w)
			writeLogin(w, http.StatusServiceUnavailable, "The store is unavailable: you are still signed in; try again.")
			return
		}
	}
	http.SetCookie(w, &http.Cookie{Name: adminCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// Fleet page builds: at most fleetBuilds at once (each reads the window's
// roll-ups, not the raw uploads, so a few is cheap), and each window's
// page is kept fleetCacheTTL (admins reloading the same morning view).
const (
	fleetBuilds    = 4
	fleetCacheTTL  = 30 * time.Second
	fleetCacheSize = 32
)

type fleetCache struct {
	mu    sync.Mutex
	sem   chan struct{}
	pages map[string]cachedPage
}

type cachedPage struct {
	body  []byte
	until time.Time
}

func (c *fleetCache) get(k string, now time.Time) ([]byte, chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sem == nil {
		c.sem, c.pages = make(chan struct{}, fleetBuilds), map[string]cachedPage{}
	}
	if p, ok := c.pages[k]; ok && now.Before(p.until) {
		return p.body, c.sem
	}
	return nil, c.sem
}

func (c *fleetCache) put(k string, body []byte, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pages) >= fleetCacheSize {
		for k, p := range c.pages {
			if !now.Before(p.until) {
				delete(c.pages, k)
			}
		}
		if len(c.pages) >= fleetCacheSize {
			clear(c.pages)
		}
	}
	c.pages[k] = cachedPage{body: body, until: now.Add(fleetCacheTTL)}
}

// parseWindow reads ?since=&until=&probe= (the fleet page's and the
// report's window); unknown parameters other than allowed are refused.
func parseWindow(q url.Values, now time.Time, allowed ...string) (storeinput.Window, error) {
	for k := range q {
		if k != "since" && k != "until" && k != "probe" && !slices.Contains(allowed, k) {
			return storeinput.Window{}, fmt.Errorf("unknown parameter %q (want since, until, probe%s)", k, strings.Join(append([]string{""}, allowed...), ", "))
		}
	}
	var since, until time.Time
	for _, p := range []struct {
		name string
		to   *time.Time
	}{{"since", &since}, {"until", &until}} {
		if v := q.Get(p.name); v != "" {
			t, err := storeinput.ParseWhen(v, now)
			if err != nil {
				return storeinput.Window{}, fmt.Errorf("%s %w", p.name, err)
			}
			*p.to = t
		}
	}
	return storeinput.NewWindow(since, until, q.Get("probe"), now)
}

// drillLink is the exact per-run report of one probe (or the fleet) over
// [since, until): bounded, because its window is.
func drillLink(probe string, since, until time.Time) string {
	v := url.Values{}
	if probe != "" {
		v.Set("probe", probe)
	}
	v.Set("since", since.UTC().Format(time.RFC3339))
	v.Set("until", until.UTC().Format(time.RFC3339))
	return "/v1/report?" + v.Encode()
}

// handleFleetPage is the fleet for a person: the probes (last seen, spool
// backlog, last status, refused tasks), the window's recent failures, then
// the fleet views over the window (?since=&until=&probe=, the last 7 UTC
// days by default) from the roll-ups, never the raw uploads; every probe,
// day and probe-day links to its exact per-run report.
func (s *Server) handleFleetPage(w http.ResponseWriter, r *http.Request) {
	_, ok, down := s.cookieState(r)
	if down {
		s.retryAfter(w)
		writeLogin(w, http.StatusServiceUnavailable, "The collector's store is unavailable; reload in a few seconds.")
		return
	}
	if !ok {
		writeLogin(w, http.StatusOK, "")
		return
	}
	now := time.Now()
	win, err := parseWindow(r.URL.Query(), now)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	key := win.Since.String() + win.Until.String() + win.Probe
	body, sem := s.fleet.get(key, now)
	if body == nil {
		select {
		case sem <- struct{}{}:
		default:
			w.Header().Set("Retry-After", "5")
			writeLogin(w, http.StatusTooManyRequests, "Fleet pages are being built; reload in a few seconds.")
			return
		}
		body, err = s.fleetPage(r.Context(), win, now)
		<-sem
		if err != nil {
			s.log.Error("fleet page", "err", err)
			s.retryAfter(w)
			writeLogin(w, http.StatusServiceUnavailable, "The collector's store is unavailable; reload in a few seconds.")
			return
		}
		s.fleet.put(key, body, now)
	}
	pageHeaders(w)
	_, _ = w.Write(body)
}

// fleetPage builds the page of window win.
func (s *Server) fleetPage(ctx context.Context, win storeinput.Window, now time.Time) ([]byte, error) {
	fleet, err := storeinput.FleetViews(ctx, s.cfg.Store, win, drillLink)
	if err != nil {
		return nil, err
	}
	tables, err := s.fleetTables(ctx, win, fleet.Failing, now)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := render.HTML(&b, "mptester fleet", append(append(tables, windowPicker(win, now)), fleet.Tables...), fleet.Figures); err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	return b.Bytes(), nil
}

// windowPicker links the usual windows; any other is ?since=&until=&probe=.
func windowPicker(win storeinput.Window, now time.Time) analysis.Table {
	t := analysis.Table{Name: "fleet-window-picker", Title: "Windows",
		Note:    "shown: " + win.Since.Format(time.RFC3339) + " to " + win.Until.Format(time.RFC3339) + "; any other with ?since=&until=&probe= (RFC 3339, a date, or 36h / 7d back from now)",
		Columns: []string{"window", "since", "until"}}
	for _, p := range []struct {
		name  string
		since string
	}{{"last 24 hours", "24h"}, {"last 7 days", "7d"}, {"last 30 days", "30d"}, {"last 365 days", "365d"}} {
		w, err := parseWindow(url.Values{"since": {p.since}, "probe": {win.Probe}}, now)
		if err != nil {
			continue
		}
		v := url.Values{"since": {p.since}}
		if win.Probe != "" {
			v.Set("probe", win.Probe)
		}
		t.Rows = append(t.Rows, []string{p.name, w.Since.Format(time.RFC3339), w.Until.Format(time.RFC3339)})
		t.Href = append(t.Href, "/?"+v.Encode())
	}
	return t
}

// fleetTables are the probes and the recent failures, as report tables.
func (s *Server) fleetTables(ctx context.Context, win storeinput.Window, failing []storeinput.ProbeBucket, now time.Time) ([]analysis.Table, error) {
	probes, err := ListProbes(ctx, s.cfg.Store)
	if err != nil {
		return nil, err
	}
	pt := analysis.Table{Name: "fleet-probes", Title: "Probes",
		Note:    "last seen: the probe's last upload or status report; backlog: results still in its spool then; runs: all it ever uploaded; each probe links to the exact report of its runs in the window",
		Columns: []string{"probe", "last_seen", "ago", "runs", "spool_backlog", "dropped", "last_status", "refused_tasks", "enrolled"}}
	for _, p := range probes {
		seen, ago := "never", "-"
		if p.LastSeen != nil {
			seen = p.LastSeen.UTC().Format(time.RFC3339)
			ago = now.Sub(*p.LastSeen).Round(time.Second).String()
		}
		enrolled := "yes"
		if p.RevokedAt != nil {
			enrolled = "revoked " + p.RevokedAt.UTC().Format(time.DateOnly)
		}
		pt.Rows = append(pt.Rows, []string{p.Name, seen, ago, fmt.Sprint(p.Runs), fmt.Sprint(p.Backlog), fmt.Sprint(p.Dropped),
			cmp.Or(p.LastStatus, "-"), fmt.Sprint(len(p.Refusals)), enrolled})
		pt.Href = append(pt.Href, drillLink(p.Name, win.Since, win.Until))
	}
	// The failures from the index, in the probe-buckets the roll-ups say
	// hold some, newest first: never the window's every run.
	var runs []store.Run
	for i, pb := range failing {
		if len(runs) >= failuresShown && pb.Bucket.Before(failing[i-1].Bucket) {
			break // older buckets cannot hold newer failures
		}
		for after := int64(0); ; {
			page, err := s.cfg.Store.ListRuns(ctx, store.RunFilter{Probe: pb.Probe, Since: pb.Bucket, Until: pb.Bucket.Add(win.Width), After: after, Limit: 1000})
			if err != nil {
				return nil, err
			}
			for _, r := range page {
				if r.Status != "ok" {
					runs = append(runs, r)
				}
			}
			if len(page) < 1000 {
				break
			}
			after = page[len(page)-1].Seq
		}
	}
	sort.SliceStable(runs, func(i, j int) bool { return runs[i].StartedAt.After(runs[j].StartedAt) })
	ft := analysis.Table{Name: "fleet-failures", Title: "Recent failures",
		Note:    fmt.Sprintf("the last %d runs in the window that did not end ok, newest first; each links to its probe's runs of that day", failuresShown),
		Columns: []string{"probe", "run_id", "command", "started", "status"}}
	for _, r := range runs {
		if len(ft.Rows) == failuresShown {
			break
		}
		ft.Rows = append(ft.Rows, []string{r.ProbeID, r.RunID, r.Command, r.StartedAt.UTC().Format(time.RFC3339), cmp.Or(r.Status, "unknown")})
		day := r.StartedAt.UTC().Truncate(store.Day)
		ft.Href = append(ft.Href, drillLink(r.ProbeID, day, day.Add(store.Day)))
	}
	out := []analysis.Table{pt}
	if len(ft.Rows) > 0 {
		out = append(out, ft)
	}
	return out, nil
}
