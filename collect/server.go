// Package collect is the server probes upload their results to: every
// upload is checked against report/schema while it streams to disk, kept
// raw and immutable, and indexed (package collect/store) before the probe
// gets its 2xx receipt. It reads results only through package report.
package collect

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mptester/mptester/collect/rawstore"
	"github.com/mptester/mptester/collect/store"
)

// Limits bound what one upload and the whole server may take.
type Limits struct {
	// MaxBytes bounds an upload, compressed and uncompressed (413 beyond).
	MaxBytes int64
	// MaxDocument bounds a run sent as one JSON document, which is
	// validated whole (JSON Lines streams are validated line by line).
	MaxDocument int64
	// MaxInFlight uploads at once; more are answered 429 with Retry-After.
	MaxInFlight int
	// RetryAfter is what a 429 asks the probe to wait.
	RetryAfter time.Duration
}

// DefaultLimits fit a 40 MB survey and a few hundred probes at once.
func DefaultLimits() Limits {
	return Limits{MaxBytes: 256 << 20, MaxDocument: 16 << 20, MaxInFlight: 512, RetryAfter: 5 * time.Second}
}

// Config of a Server.
type Config struct {
	Store store.Store
	Data  string // directory for raw uploads (and the S3 spool)
	// Raw is where raw uploads live; nil: the directory Data.
	Raw rawstore.Backend
	// InlineMax: uploads up to this size are kept in the database with
	// their index row; 0 means DefaultInlineMax, negative never.
	InlineMax int
	Limits    Limits
	Logger    *slog.Logger
	// Now is the server clock (tests fix it).
	Now func() time.Time
}

// Server is the collect HTTP API.
type Server struct {
	cfg       Config
	raw       rawstore.Backend
	inlineMax int
	sem       chan struct{}
	m         *metrics
	log       *slog.Logger
	mux       *http.ServeMux
	// derive queues stored runs for the derived tables (Serve runs it).
	derive chan store.Run
	// missed: a run did not fit in derive; the deriver catches up.
	missed atomic.Bool
	// reports bounds GET /v1/report's concurrent builds.
	reports chan struct{}
}

// New checks cfg and prepares the data directory.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("collect: no store")
	}
	if cfg.Limits.MaxBytes <= 0 || cfg.Limits.MaxInFlight <= 0 || cfg.Limits.MaxDocument <= 0 {
		return nil, errors.New("collect: limits must be positive")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Raw == nil {
		d, err := rawstore.NewDir(cfg.Data)
		if err != nil {
			return nil, err
		}
		cfg.Raw = d
	}
	inl := cfg.InlineMax
	switch {
	case inl == 0:
		inl = DefaultInlineMax
	case inl < 0:
		inl = 0
	}
	s := &Server{cfg: cfg, raw: cfg.Raw, inlineMax: inl, sem: make(chan struct{}, cfg.Limits.MaxInFlight), m: newMetrics(), log: cfg.Logger,
		mux: http.NewServeMux(), derive: make(chan store.Run, 4096), reports: make(chan struct{}, maxReports)}
	s.mux.HandleFunc("PUT /v1/runs/{run_id}", s.handlePut)
	s.mux.HandleFunc("GET /v1/runs", s.admin(s.handleList))
	s.mux.HandleFunc("GET /v1/runs/{run_id}", s.admin(s.handleGet))
	s.mux.HandleFunc("GET /v1/probes", s.admin(s.handleProbes))
	s.mux.HandleFunc("GET /v1/probes/{probe}/config", s.handleGetSchedule)
	s.mux.HandleFunc("PUT /v1/probes/{probe}/config", s.admin(s.handlePutSchedule))
	s.mux.HandleFunc("GET /v1/report", s.handleReport)
	s.mux.HandleFunc("GET /healthz", s.handleHealth)
	s.mux.Handle("GET /metrics", s.admin(promhttp.HandlerFor(s.m.reg, promhttp.HandlerOpts{}).ServeHTTP))
	return s, nil
}

// Handler is the API, for tests and embedding.
func (s *Server) Handler() http.Handler { return s.mux }

// Serve answers on ln (TLS when cert is non-nil) until ctx is done, then
// lets running uploads finish for up to grace.
func (s *Server) Serve(ctx context.Context, ln net.Listener, cert *tls.Certificate, grace time.Duration) error {
	hs := &http.Server{Handler: s.mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}
	if cert != nil {
		hs.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12}
		ln = tls.NewListener(ln, hs.TLSConfig)
	}
	dctx, stopDerive := context.WithCancel(ctx)
	defer stopDerive()
	go s.deriver(dctx)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	return hs.Shutdown(sctx)
}

// apiError is every error answer's body.
type apiError struct {
	Error   string `json:"error"`
	Reason  string `json:"reason,omitempty"`
	Line    int    `json:"line,omitempty"`
	Pointer string `json:"pointer,omitempty"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// admin wraps a read or management endpoint: admin token only.
func (s *Server) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, code := s.authenticate(r)
		if code == 0 && tok.Role != store.RoleAdmin {
			code = http.StatusForbidden
		}
		if code != 0 {
			writeJSON(w, code, apiError{Error: http.StatusText(code), Reason: "this endpoint needs an admin token"})
			return
		}
		h(w, r)
	}
}

// authenticate returns the request's token, or the status to answer.
func (s *Server) authenticate(r *http.Request) (store.Token, int) {
	raw := bearer(r)
	if raw == "" {
		return store.Token{}, http.StatusUnauthorized
	}
	tok, err := s.cfg.Store.LookupToken(r.Context(), HashToken(raw))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Token{}, http.StatusUnauthorized
	case err != nil:
		s.log.Error("token lookup", "err", err)
		return store.Token{}, http.StatusServiceUnavailable
	}
	return tok, 0
}

// handleHealth answers 200 only when this replica reaches both the index
// and the raw store, so a load balancer can drop it otherwise. The reason
// says which one failed, not why (no paths or addresses to the world).
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	st := map[string]string{"status": "ok", "index": "ok", "raw": "ok"}
	code := http.StatusOK
	if _, err := s.cfg.Store.GetRun(ctx, "-"); err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Warn("health: index unavailable", "err", err)
		st["index"], st["status"], code = "unavailable", "unavailable", http.StatusServiceUnavailable
	}
	if err := s.raw.Check(ctx); err != nil {
		s.log.Warn("health: raw store unavailable", "raw", s.raw.String(), "err", err)
		st["raw"], st["status"], code = "unavailable", "unavailable", http.StatusServiceUnavailable
	}
	writeJSON(w, code, st)
}
