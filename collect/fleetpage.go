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
	"sort"
	"time"

	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/collect/storeinput"
	"github.com/mptester/mptester/internal/buildinfo"
	"github.com/mptester/mptester/report/analysis"
	"github.com/mptester/mptester/report/render"
)

// The fleet page: GET / shows the fleet to an admin in a browser. The
// admin token is entered once in a form and kept in a cookie the page's
// scripts cannot read (HttpOnly), sent only over HTTPS (Secure; browsers
// treat loopback as secure) and never from another site (SameSite=Strict);
// no token ever appears in a URL. The cookie authenticates reads only
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
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return store.Token{}, false
	}
	c, err := r.Cookie(adminCookie)
	if err != nil || c.Value == "" {
		return store.Token{}, false
	}
	tok, err := s.cfg.Store.LookupToken(r.Context(), HashToken(c.Value))
	if err != nil || tok.Role != store.RoleAdmin {
		return store.Token{}, false
	}
	return tok, true
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
<p>The token is kept in a cookie of this browser for 12 hours; it is never put in a URL.</p>
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
	http.SetCookie(w, &http.Cookie{Name: adminCookie, Value: raw, Path: "/", MaxAge: int(adminCookieAge.Seconds()),
		HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: adminCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// handleFleetPage is the fleet for a person: the probes (last seen, spool
// backlog, last status, refused tasks), the recent failures, then the
// fleet views of the report (runs per day, reachability and RTT per probe
// and cell over time), every row linking to the report of its runs; the
// same renderer as `mptester report`.
func (s *Server) handleFleetPage(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.cookieAdmin(r); !ok {
		writeLogin(w, http.StatusOK, "")
		return
	}
	select {
	case s.reports <- struct{}{}:
		defer func() { <-s.reports }()
	default:
		w.Header().Set("Retry-After", "5")
		writeLogin(w, http.StatusTooManyRequests, "Reports are being built; reload in a few seconds.")
		return
	}
	tables, err := s.fleetTables(r.Context(), time.Now())
	if err != nil {
		s.log.Error("fleet page", "err", err)
		http.Error(w, "the store could not be read", http.StatusInternalServerError)
		return
	}
	seq, done := s.inputs().Inputs(r.Context(), storeinput.Filter{})
	rep, err := analysis.AnalyzeSeq(seq, done, analysis.Options{Tool: "mptester " + buildinfo.Version,
		Source: "collect server", Fleet: true})
	if err != nil {
		s.log.Error("fleet page report", "err", err)
		http.Error(w, "the store could not be read", http.StatusInternalServerError)
		return
	}
	defer rep.Close()
	var b bytes.Buffer
	if err := render.HTML(&b, "mptester fleet", append(tables, rep.Tables...), rep.Figures); err != nil {
		s.log.Error("fleet page render", "err", err)
		http.Error(w, "rendering failed", http.StatusInternalServerError)
		return
	}
	pageHeaders(w)
	_, _ = w.Write(b.Bytes())
}

// reportLink is the page of one probe's runs (or one run's probe).
func reportLink(probe string) string { return "/v1/report?probe=" + url.QueryEscape(probe) }

// fleetTables are the probes and the recent failures, as report tables.
func (s *Server) fleetTables(ctx context.Context, now time.Time) ([]analysis.Table, error) {
	probes, err := ListProbes(ctx, s.cfg.Store)
	if err != nil {
		return nil, err
	}
	pt := analysis.Table{Name: "fleet-probes", Title: "Probes",
		Note:    "last seen: the probe's last upload or status report; backlog: results still in its spool then; each probe links to the report of its runs",
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
		pt.Href = append(pt.Href, reportLink(p.Name))
	}
	// Page through the index keeping only the failures, so a fleet's
	// months of runs are never held at once.
	var runs []store.Run
	for after := int64(0); ; {
		page, err := s.cfg.Store.ListRuns(ctx, store.RunFilter{After: after, Limit: 1000})
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
	sort.SliceStable(runs, func(i, j int) bool { return runs[i].StartedAt.After(runs[j].StartedAt) })
	ft := analysis.Table{Name: "fleet-failures", Title: "Recent failures",
		Note:    fmt.Sprintf("the last %d runs that did not end ok, newest first; each links to its probe's report", failuresShown),
		Columns: []string{"probe", "run_id", "command", "started", "status"}}
	for _, r := range runs {
		if len(ft.Rows) == failuresShown {
			break
		}
		ft.Rows = append(ft.Rows, []string{r.ProbeID, r.RunID, r.Command, r.StartedAt.UTC().Format(time.RFC3339), cmp.Or(r.Status, "unknown")})
		ft.Href = append(ft.Href, reportLink(r.ProbeID))
	}
	out := []analysis.Table{pt}
	if len(ft.Rows) > 0 {
		out = append(out, ft)
	}
	return out, nil
}
