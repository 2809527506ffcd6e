package collect

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/mptester/mptester/collect/store"
)

// RunPage is one page of GET /v1/runs; Next is the after= of the next page
// ("" on the last).
type RunPage struct {
	Runs []store.Run `json:"runs"`
	Next string      `json:"next,omitempty"`
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.RunFilter{Probe: q.Get("probe"), Command: q.Get("type")}
	var err error
	bad := func(field string, e error) {
		writeJSON(w, http.StatusBadRequest, apiError{Error: "bad query", Reason: field + ": " + e.Error()})
	}
	for name, dst := range map[string]*time.Time{"since": &f.Since, "until": &f.Until} {
		if v := q.Get(name); v != "" {
			if *dst, err = time.Parse(time.RFC3339Nano, v); err != nil {
				bad(name, err)
				return
			}
		}
	}
	if v := q.Get("after"); v != "" {
		if f.After, err = strconv.ParseInt(v, 10, 64); err != nil {
			bad("after", err)
			return
		}
	}
	f.Limit = 100
	if v := q.Get("limit"); v != "" {
		if f.Limit, err = strconv.Atoi(v); err != nil || f.Limit <= 0 || f.Limit > store.MaxPage {
			bad("limit", errors.New("want 1.."+strconv.Itoa(store.MaxPage)))
			return
		}
	}
	runs, err := s.cfg.Store.ListRuns(r.Context(), f)
	if err != nil {
		s.unavailable(w, err)
		return
	}
	page := RunPage{Runs: runs}
	if len(runs) == f.Limit {
		page.Next = strconv.FormatInt(runs[len(runs)-1].Seq, 10)
	}
	writeJSON(w, http.StatusOK, page)
}

// handleGet answers the raw upload, byte for byte as the probe wrote it.
func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	run, err := s.cfg.Store.GetRun(r.Context(), r.PathValue("run_id"))
	if errors.Is(err, store.ErrNotFound) {
		writeJSON(w, http.StatusNotFound, apiError{Error: "no such run"})
		return
	}
	if err != nil {
		s.unavailable(w, err)
		return
	}
	f, err := s.openRaw(r.Context(), run)
	if err != nil {
		s.log.Error("raw upload unreadable", "run_id", run.RunID, "err", err)
		writeJSON(w, http.StatusInternalServerError, apiError{Error: "raw upload unreadable", Reason: "see the collector's log"})
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", run.ContentType)
	w.Header().Set("Content-Length", strconv.FormatInt(run.Bytes, 10))
	w.Header().Set("ETag", `"`+run.SHA256+`"`)
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, f)
}

func (s *Server) handleProbes(w http.ResponseWriter, r *http.Request) {
	out, err := ListProbes(r.Context(), s.cfg.Store)
	if err != nil {
		s.unavailable(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"probes": out})
}
