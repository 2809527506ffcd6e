package collect

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/collect/storeinput"
	"github.com/mptester/mptester/internal/buildinfo"
	"github.com/mptester/mptester/report/analysis"
	"github.com/mptester/mptester/report/render"
)

// maxReports bounds reports built at once: each streams every chosen run
// from disk, so a few operators' browsers must not starve uploads.
const maxReports = 2

// inputs are the collector's runs as report input: every report page
// reads them through it, so none can miss the raw store's backend.
func (s *Server) inputs() storeinput.Source { return storeinput.New(s.cfg.Store, s.raw) }

// handleReport is GET /v1/report?probe=&type=&since=&until=&format=: the
// page `mptester report --db` writes (html, the default, or json), built
// from the store on request. A probe's token sees its own runs only; an
// admin token sees any probe or, without probe=, the fleet.
func (s *Server) handleReport(w http.ResponseWriter, r *http.Request) {
	tok, code := s.authenticate(r)
	if t, ok := s.cookieAdmin(r); code != 0 && ok { // the fleet page's links
		tok, code = t, 0
	}
	if code != 0 {
		writeJSON(w, code, apiError{Error: http.StatusText(code), Reason: "this endpoint needs a probe's or an admin token"})
		return
	}
	q := r.URL.Query()
	for k := range q {
		switch k {
		case "probe", "type", "since", "until", "format":
		default:
			writeJSON(w, http.StatusBadRequest, apiError{Error: "Bad Request", Reason: fmt.Sprintf("unknown parameter %q (want probe, type, since, until, format)", k)})
			return
		}
	}
	f := storeinput.Filter{Probe: q.Get("probe"), Command: q.Get("type")}
	if tok.Role != store.RoleAdmin {
		if f.Probe != "" && f.Probe != tok.Name {
			writeJSON(w, http.StatusForbidden, apiError{Error: "Forbidden", Reason: fmt.Sprintf("a probe's token reports on its own probe %q only", tok.Name)})
			return
		}
		f.Probe = tok.Name
	}
	bad := func(reason string) {
		writeJSON(w, http.StatusBadRequest, apiError{Error: "Bad Request", Reason: reason})
	}
	if f.Command != "" && f.Command != "run" && f.Command != "survey" {
		bad(fmt.Sprintf("type %q: want run or survey", f.Command))
		return
	}
	for _, p := range []struct {
		name string
		to   *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := q.Get(p.name); v != "" {
			t, err := storeinput.ParseTime(v)
			if err != nil {
				bad(p.name + " " + err.Error())
				return
			}
			*p.to = t
		}
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since) {
		bad("until must be after since")
		return
	}
	format := q.Get("format")
	if format == "" {
		format = "html"
	}
	if format != "html" && format != "json" {
		bad(fmt.Sprintf("format %q: want html or json", format))
		return
	}
	select {
	case s.reports <- struct{}{}:
		defer func() { <-s.reports }()
	default:
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusTooManyRequests, apiError{Error: "Too Many Requests", Reason: strconv.Itoa(maxReports) + " reports are being built"})
		return
	}
	seq, done := s.inputs().Inputs(r.Context(), f)
	rep, err := analysis.AnalyzeSeq(seq, done, analysis.Options{Tool: "mptester " + buildinfo.Version,
		Source: "collect server", Filters: f.Strings(), Fleet: true, SkipBad: true})
	if err != nil {
		// A stored upload the report cannot read is the server's fault.
		s.log.Error("report", "err", err)
		reason := "the store could not be read (see the collector's log)"
		if errors.Is(err, analysis.ErrInput) {
			reason = "a stored upload could not be read (see the collector's log)"
		}
		writeJSON(w, http.StatusInternalServerError, apiError{Error: "Internal Server Error", Reason: reason})
		return
	}
	defer rep.Close()
	var b bytes.Buffer
	if err := render.Write(&b, format, rep.Tables, rep.Figures); err != nil {
		s.log.Error("report render", "err", err)
		writeJSON(w, http.StatusInternalServerError, apiError{Error: "Internal Server Error", Reason: "rendering failed"})
		return
	}
	ct := "text/html; charset=utf-8"
	if format == "json" {
		ct = "application/json"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(b.Bytes())
}
