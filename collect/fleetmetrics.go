package collect

import (
	"bytes"
	"net/http"
	"sync"
	"time"

	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/internal/fleetfig"
)

// FleetMetricsTTL is how long /metrics/fleet serves the figures it last
// computed: a scrape reads a cached page; at most one refresh per TTL
// queries the store (the probes table and each probe's last derived runs,
// never the raw uploads).
const FleetMetricsTTL = 30 * time.Second

type fleetMetrics struct {
	mu   sync.Mutex
	at   time.Time
	page []byte
}

// fleetMetricsRoutes adds GET /metrics/fleet (admin token).
func (s *Server) fleetMetricsRoutes() {
	fm := &fleetMetrics{}
	s.mux.HandleFunc("GET /metrics/fleet", s.admin(func(w http.ResponseWriter, r *http.Request) {
		page, err := fm.get(r, s)
		if err != nil {
			s.log.Error("fleet metrics", "err", err)
			writeJSON(w, http.StatusServiceUnavailable, apiError{Error: http.StatusText(http.StatusServiceUnavailable), Reason: "fleet figures unavailable"})
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(page)
	}))
}

// get returns the cached page, refreshed when older than the TTL; scrapes
// that arrive during a refresh wait for it (one query at a time).
func (fm *fleetMetrics) get(r *http.Request, s *Server) ([]byte, error) {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	now := s.cfg.Now()
	if fm.page != nil && now.Sub(fm.at) < FleetMetricsTTL && !now.Before(fm.at) {
		return fm.page, nil
	}
	f, err := s.cfg.Store.Fleet(r.Context())
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := FleetFigures(f).WriteText(&buf, now); err != nil {
		return nil, err
	}
	fm.page, fm.at = buf.Bytes(), now
	return fm.page, nil
}

// FleetFigures turns the store's fleet rows into figures per probe.
func FleetFigures(f store.Fleet) fleetfig.Figures {
	byName := map[string]*fleetfig.Probe{}
	var order []string
	revoked := map[string]bool{}
	for _, p := range f.Probes {
		revoked[p.Name] = p.RevokedAt != nil
	}
	// A revoked probe has no figures: its rows go to a throwaway.
	probe := func(name string) *fleetfig.Probe {
		if revoked[name] {
			return &fleetfig.Probe{}
		}
		p, ok := byName[name]
		if !ok {
			p = &fleetfig.Probe{Name: name}
			byName[name] = p
			order = append(order, name)
		}
		return p
	}
	for _, p := range f.Probes {
		fp := probe(p.Name)
		if p.LastSeen != nil {
			fp.LastSeen = *p.LastSeen
			fp.Spool = &fleetfig.Spool{Backlog: p.Backlog, Dropped: &p.Dropped}
		}
	}
	kinds := map[string]map[string]string{} // run -> path -> kind
	for _, c := range f.Cells {
		k := kinds[c.RunID]
		if k == nil {
			k = map[string]string{}
			kinds[c.RunID] = k
		}
		k[c.ProbePath], k[c.ResolvePath] = c.ProbeKind, c.ResolveKind
	}
	for _, c := range f.Cells {
		p := probe(c.Probe)
		if p.Survey == nil {
			p.Survey = &fleetfig.Survey{StartedAt: c.StartedAt}
		}
		p.Survey.Cells = append(p.Survey.Cells, fleetfig.Cell{ProbePath: c.ProbePath, ResolvePath: c.ResolvePath,
			Study: fleetfig.Study(kinds[c.RunID], c.ProbePath, c.ResolvePath), Targets: c.Targets, Responsive: c.Responsive,
			RTTMedian: msDuration(c.RTTP50ms), RTTMean: msDuration(c.RTTMeanms), RTTQuantiles: CellQuantiles(c.SurveyCell)})
	}
	// Each probe's last run, its tests in the run's order (the store
	// reads them so, probe by probe).
	for i := 0; i < len(f.Tests); {
		first := f.Tests[i]
		var tests []fleetfig.Test
		for ; i < len(f.Tests) && f.Tests[i].Probe == first.Probe; i++ {
			t := f.Tests[i]
			tests = append(tests, fleetfig.Test{Transport: t.Transport, Pattern: t.Pattern, Status: t.Status, Invalid: t.Invalid,
				Bulk: t.Bulk, Upload: t.Upload, Download: t.Download})
		}
		probe(first.Probe).Run = fleetfig.NewRun(first.StartedAt, tests)
	}
	for _, h := range f.Handovers {
		p := probe(h.Probe)
		if p.Mobile == nil {
			p.Mobile = &fleetfig.Mobile{StartedAt: h.StartedAt}
		}
		p.Mobile.Handovers = append(p.Mobile.Handovers, fleetfig.Handover{Transport: h.Transport, MaxUpload: h.Upload, MaxDown: h.Download})
	}
	out := fleetfig.Figures{}
	for _, n := range order {
		out.Probes = append(out.Probes, *byName[n])
	}
	return out
}

// CellQuantiles are a derived cell's RTT quantiles besides the median
// (the probe's textfile uses it too, so the two agree).
func CellQuantiles(c store.SurveyCell) []fleetfig.Quantile {
	var out []fleetfig.Quantile
	for _, q := range []struct {
		q  float64
		ms *float64
	}{{0.1, c.RTTP10ms}, {0.25, c.RTTP25ms}, {0.75, c.RTTP75ms}, {0.9, c.RTTP90ms}} {
		if q.ms != nil {
			out = append(out, fleetfig.Quantile{Q: q.q, Value: msDuration(*q.ms)})
		}
	}
	return out
}

func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
