package collect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
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

// handleReport is GET /v1/report?probe=&type=&since=&until=&format=
// (html, the default, or json) over a window (the last 7 UTC days by
// default; since and until also take 36h or 7d back from now). For one
// probe, or for at most one day of the fleet, it is the exact per-run
// report `mptester report --db` writes for that window, read from the raw
// uploads; for the fleet over a longer window it is the fleet views from
// the roll-ups, which never read a raw upload (their rows link to the
// exact reports). A probe's token sees its own runs only; an admin token
// sees any probe or the fleet.
func (s *Server) handleReport(w http.ResponseWriter, r *http.Request) {
	tok, code := s.authenticate(r)
	if t, ok := s.cookieAdmin(r); code != 0 && ok { // the fleet page's links
		tok, code = t, 0
	}
	if code != 0 {
		s.authFailed(w, code, "a probe's or an admin token")
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
	now := time.Now()
	win, err := parseWindow(url.Values{"since": q["since"], "until": q["until"], "probe": {f.Probe}}, now)
	if err != nil {
		bad(err.Error())
		return
	}
	if q.Get("since") != "" || q.Get("until") != "" || f.Probe == "" {
		f.Since, f.Until = win.Since, win.Until
	}
	// The fleet over more than a day: the roll-ups only.
	fleet := f.Probe == "" && win.Until.Sub(win.Since) > store.Day
	format := q.Get("format")
	if format == "" {
		format = "html"
	}
	if format != "html" && format != "json" {
		bad(fmt.Sprintf("format %q: want html or json", format))
		return
	}
	if fleet {
		s.fleetReport(w, r, win, f, format, now)
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
	securityHeaders(w)
	_, _ = w.Write(b.Bytes())
}

// fleetReport writes the fleet views over win from the roll-ups, with the
// provenance of a report that read no run (the filters say which window).
func (s *Server) fleetReport(w http.ResponseWriter, r *http.Request, win storeinput.Window, f storeinput.Filter, format string, now time.Time) {
	key := "report " + format + win.Since.String() + win.Until.String() + f.Command
	body, sem := s.fleet.get(key, now)
	if body == nil {
		select {
		case sem <- struct{}{}:
		default:
			w.Header().Set("Retry-After", "5")
			writeJSON(w, http.StatusTooManyRequests, apiError{Error: "Too Many Requests", Reason: "fleet reports are being built"})
			return
		}
		var err error
		body, err = s.buildFleetReport(r.Context(), win, f, format)
		<-sem
		if err != nil {
			s.log.Error("fleet report", "err", err)
			writeJSON(w, http.StatusInternalServerError, apiError{Error: "Internal Server Error", Reason: "the store could not be read (see the collector's log)"})
			return
		}
		s.fleet.put(key, body, now)
	}
	ct := "text/html; charset=utf-8"
	if format == "json" {
		ct = "application/json"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "no-store")
	securityHeaders(w)
	_, _ = w.Write(body)
}

func (s *Server) buildFleetReport(ctx context.Context, win storeinput.Window, f storeinput.Filter, format string) ([]byte, error) {
	fl, err := storeinput.FleetViews(ctx, s.cfg.Store, win, drillLink)
	if err != nil {
		return nil, err
	}
	none := func(func(analysis.Input) bool) {}
	rep, err := analysis.AnalyzeSeq(none, nil, analysis.Options{Tool: "mptester " + buildinfo.Version,
		Source: "collect server (roll-ups; per-record sections: ask for one probe or one day)", Filters: f.Strings()})
	if err != nil {
		return nil, err
	}
	defer rep.Close()
	var b bytes.Buffer
	if err := render.Write(&b, format, append(rep.Tables, fl.Tables...), fl.Figures); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
