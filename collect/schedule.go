package collect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/mptester/mptester/agent/caps"
	"github.com/mptester/mptester/collect/api"
	"github.com/mptester/mptester/collect/store"
)

// ProbeStatus is what a probe reports about itself besides its uploads:
// its owner's caps and the tasks of its schedule it did not run.
type ProbeStatus struct {
	Caps     caps.Caps     `json:"caps"`
	Refusals []api.Refusal `json:"refusals"`
}

// ListedProbe is an enrolled probe with its owner's caps and the tasks
// it refused or skipped, as it last reported them.
type ListedProbe struct {
	store.Probe
	Caps     *caps.Caps    `json:"caps,omitempty"`
	Refusals []api.Refusal `json:"refusals"`
}

// ListProbes lists the probes with their last status reports (GET
// /v1/probes, collect probe list).
func ListProbes(ctx context.Context, st store.Store) ([]ListedProbe, error) {
	ps, err := st.ListProbes(ctx)
	if err != nil {
		return nil, err
	}
	statuses, err := st.ProbeStatuses(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]ListedProbe, len(ps))
	for i, p := range ps {
		out[i] = ListedProbe{Probe: p, Refusals: []api.Refusal{}}
		var rep ProbeStatus
		if b, ok := statuses[p.Name]; ok && json.Unmarshal(b, &rep) == nil {
			out[i].Caps = &rep.Caps
			if rep.Refusals != nil {
				out[i].Refusals = rep.Refusals
			}
		}
	}
	return out, nil
}

// ErrUnknownProbe: a schedule names a probe that is not enrolled.
var ErrUnknownProbe = store.ErrNotFound

// CheckSchedule validates body as the next schedule of probe before it is
// stored: the schema, then the caps of the probes it applies to (as they
// last reported them, else the defaults). The error names the field (and
// the probe); it wraps api.ErrInvalid or ErrUnknownProbe.
func CheckSchedule(ctx context.Context, st store.Store, probe string, body []byte) error {
	sc, err := api.ParseSchedule(body)
	if err != nil {
		return err
	}
	if sc.Signed != nil && sc.Probe != store.AnyProbe && sc.Probe != probe {
		return &api.FieldError{Field: "signed.payload: probe", Reason: fmt.Sprintf("signed for probe %q, set for %q", sc.Probe, probe)}
	}
	ps, err := st.ListProbes(ctx)
	if err != nil {
		return err
	}
	statuses, err := st.ProbeStatuses(ctx)
	if err != nil {
		return err
	}
	var names []string
	for _, p := range ps {
		if p.RevokedAt == nil && (probe == store.AnyProbe || p.Name == probe) {
			names = append(names, p.Name)
		}
	}
	if probe != store.AnyProbe && len(names) == 0 {
		return fmt.Errorf("probe %q is not enrolled (collect probe add, or '*' for every probe): %w", probe, ErrUnknownProbe)
	}
	check := func(who string, c caps.Caps) error {
		for _, t := range sc.Tasks {
			if err := c.Check(t); err != nil {
				return fmt.Errorf("%w (probe %s)", err, who)
			}
		}
		return nil
	}
	if len(names) == 0 {
		return check("defaults", caps.Defaults())
	}
	slices.Sort(names)
	for _, n := range names {
		c := caps.Defaults()
		var ps ProbeStatus
		if b, ok := statuses[n]; ok && json.Unmarshal(b, &ps) == nil && len(ps.Caps.Types) > 0 {
			c = ps.Caps
		}
		if err := check(n, c); err != nil {
			return err
		}
	}
	return nil
}

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
		// Stored before tasks were typed, with a parameter no schedule may
		// carry: nothing is sent until the operator sets it again.
		writeJSON(w, http.StatusConflict, apiError{Error: "stored schedule refused",
			Reason: fmt.Sprintf("revision %d of %s's schedule: %v; set a typed schedule", sc.Revision, sc.Probe, err)})
		return
	}
	parsed.Revision = sc.Revision
	writeJSON(w, http.StatusOK, parsed)
}

// handlePutSchedule stores the next revision of a schedule (admin; the
// probe "*" is the fleet's default) once CheckSchedule passes it.
func (s *Server) handlePutSchedule(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{Error: "bad body", Reason: err.Error()})
		return
	}
	probe := r.PathValue("probe")
	err = CheckSchedule(r.Context(), s.cfg.Store, probe, b)
	var rev int64
	if err == nil {
		rev, err = s.cfg.Store.PutSchedule(r.Context(), probe, b)
	}
	switch {
	case errors.Is(err, api.ErrInvalid):
		writeJSON(w, http.StatusBadRequest, apiError{Error: "bad schedule", Reason: err.Error()})
		return
	case errors.Is(err, ErrUnknownProbe):
		writeJSON(w, http.StatusNotFound, apiError{Error: "unknown probe", Reason: err.Error()})
		return
	case err != nil:
		s.unavailable(w, err)
		return
	}
	s.log.Info("schedule changed", "probe", probe, "revision", rev)
	writeJSON(w, http.StatusOK, json.RawMessage(`{"revision":`+strconv.FormatInt(rev, 10)+`}`))
}

// handlePutStatus keeps a probe's report about itself (its own token).
func (s *Server) handlePutStatus(w http.ResponseWriter, r *http.Request) {
	probe := r.PathValue("probe")
	tok, code := s.authenticate(r)
	if code == 0 && tok.Name != probe {
		code = http.StatusForbidden
	}
	if code != 0 {
		writeJSON(w, code, apiError{Error: http.StatusText(code), Reason: "a probe reports only its own status"})
		return
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var st ProbeStatus
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		err = dec.Decode(&st)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{Error: "bad status", Reason: err.Error()})
		return
	}
	if len(st.Refusals) > 256 {
		st.Refusals = st.Refusals[:256]
	}
	clean, _ := json.Marshal(st)
	if err := s.cfg.Store.PutProbeStatus(r.Context(), probe, clean, time.Now()); err != nil {
		s.unavailable(w, err)
		return
	}
	for _, rf := range st.Refusals {
		s.log.Warn("probe refused a task", "probe", probe, "task", rf.Task, "revision", rf.Revision, "reason", rf.Reason, "budget", rf.Budget)
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleSchema publishes the schedule schema.
func handleSchema(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/schema+json")
	_, _ = w.Write(api.ScheduleSchema())
}
