package collect

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/mptester/mptester/collect/api"
	"github.com/mptester/mptester/collect/store"
)

// handleGetSchedule answers a probe its schedule (its own, else the
// fleet's), with the revision as ETag: If-None-Match gets 304.
func (s *Server) handleGetSchedule(w http.ResponseWriter, r *http.Request) {
	probe := r.PathValue("probe")
	tok, code := s.authenticate(r)
	if code == 0 && tok.Role != store.RoleAdmin && tok.Name != probe {
		code = http.StatusForbidden
	}
	if code != 0 {
		writeJSON(w, code, apiError{Error: http.StatusText(code), Reason: "a probe reads only its own schedule"})
		return
	}
	sc, err := s.cfg.Store.GetSchedule(r.Context(), probe)
	if errors.Is(err, store.ErrNotFound) {
		writeJSON(w, http.StatusNotFound, apiError{Error: "no schedule for this probe"})
		return
	}
	if err != nil {
		s.unavailable(w, err)
		return
	}
	// The source is part of the tag: a probe's own revision 1 is not the
	// fleet's revision 1.
	etag := `"` + sc.Probe + "-" + strconv.FormatInt(sc.Revision, 10) + `"`
	w.Header().Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	parsed, err := api.ParseSchedule(sc.Body)
	if err != nil {
		s.log.Error("stored schedule unreadable", "err", err)
		writeJSON(w, http.StatusInternalServerError, apiError{Error: "stored schedule unreadable", Reason: "see the collector's log"})
		return
	}
	parsed.Revision = sc.Revision
	writeJSON(w, http.StatusOK, parsed)
}

// handlePutSchedule stores the next revision of a schedule (admin; the
// probe "*" is the fleet's default).
func (s *Server) handlePutSchedule(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{Error: "bad body", Reason: err.Error()})
		return
	}
	if _, err := api.ParseSchedule(b); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{Error: "bad schedule", Reason: err.Error()})
		return
	}
	rev, err := s.cfg.Store.PutSchedule(r.Context(), r.PathValue("probe"), b)
	if err != nil {
		s.unavailable(w, err)
		return
	}
	s.log.Info("schedule changed", "probe", r.PathValue("probe"), "revision", rev)
	writeJSON(w, http.StatusOK, json.RawMessage(`{"revision":`+strconv.FormatInt(rev, 10)+`}`))
}
