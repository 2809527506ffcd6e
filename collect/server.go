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
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mptester/mptester/collect/rawstore"
	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/internal/certs"
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
	// MaxPerProbe uploads at once from one probe (429 beyond), so one
	// probe cannot take the slots of the fleet.
	MaxPerProbe int
	// RetryAfter is what a 429 asks the probe to wait.
	RetryAfter time.Duration
	// MinRate, in bytes a second, is the slowest body taken: one that
	// delivers less than MinRate×RateWindow within RateWindow (counted
	// from when the last such quota was met) is cut with 408.
	MinRate    int64
	RateWindow time.Duration
	// MaxUploadTime bounds one body's transfer, however steady (408).
	MaxUploadTime time.Duration
	// MaxZstd bounds the zstd bodies decoded at once (each decoder holds
	// up to an 8 MiB window); more wait for one, up to 30 s, then 429.
	MaxZstd int
}

// DefaultLimits fit a 40 MB survey and a few hundred probes at once, and
// cut a body slower than 4 KiB/s over 5 s.
func DefaultLimits() Limits {
	return Limits{MaxBytes: 256 << 20, MaxDocument: 16 << 20, MaxInFlight: 512, MaxPerProbe: 4, RetryAfter: 5 * time.Second,
		MinRate: 4 << 10, RateWindow: 5 * time.Second, MaxUploadTime: time.Hour, MaxZstd: 8}
}

// headerTimeout bounds the request line and headers (and the TLS
// handshake, which net/http bounds by it too).
const headerTimeout = 10 * time.Second

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
	// DeriveRetry is the first wait before runs whose derivation failed
	// are tried again (doubling up to 64 times it); 0: 2 s.
	DeriveRetry time.Duration
	// StoreCheck is how often, while such a retry waits, the deriver
	// checks whether the stores are back (then it retries at once);
	// 0: 1 s.
	StoreCheck time.Duration
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
	// backlog: the runs queued for the deriver or failed and waiting for
	// a retry.
	backlog deriveBacklog
	// reports bounds GET /v1/report's concurrent builds.
	reports chan struct{}
	// fleet bounds and caches the fleet page's builds.
	fleet fleetCache
	// probes counts each probe's uploads in flight.
	probesMu sync.Mutex
	probes   map[string]int
	// zstd bounds zstd decoders at once (Limits.MaxZstd).
	zstd chan struct{}
	// tokens keeps valid tokens for TokenTTL (a look-up query per upload
	// was a third of the index's queries).
	tokensMu sync.Mutex
	tokens   map[string]cachedToken
}

// TokenTTL bounds how long a revoked token still works on a running
// collector: revocation is another process's write (`collect probe
// revoke`, on any replica), seen at the next look-up.
const TokenTTL = time.Second

// maxCachedTokens bounds the cache; a full cache starts over.
const maxCachedTokens = 1 << 14

type cachedToken struct {
	tok   store.Token
	until time.Time
}

// New checks cfg and prepares the data directory.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("collect: no store")
	}
	l := cfg.Limits
	if l.MaxBytes <= 0 || l.MaxInFlight <= 0 || l.MaxDocument <= 0 || l.MaxPerProbe <= 0 || l.MinRate <= 0 || l.RateWindow <= 0 || l.MaxUploadTime <= 0 || l.MaxZstd <= 0 {
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
		mux: http.NewServeMux(), derive: make(chan store.Run, 4096), reports: make(chan struct{}, maxReports), probes: map[string]int{}, zstd: make(chan struct{}, l.MaxZstd)}
	s.mux.HandleFunc("PUT /v1/runs/{run_id}", s.handlePut)
	s.mux.HandleFunc("GET /v1/runs", s.admin(s.handleList))
	s.mux.HandleFunc("GET /v1/runs/{run_id}", s.admin(s.handleGet))
	s.mux.HandleFunc("GET /v1/probes", s.admin(s.handleProbes))
	s.mux.HandleFunc("GET /v1/probes/{probe}/config", s.handleGetSchedule)
	s.mux.HandleFunc("PUT /v1/probes/{probe}/config", s.admin(s.handlePutSchedule))
	s.mux.HandleFunc("PUT /v1/probes/{probe}/status", s.handlePutStatus)
	s.mux.HandleFunc("GET /v1/schedule.schema.json", handleSchema)
	s.mux.HandleFunc("GET /v1/report", s.handleReport)
	s.mux.HandleFunc("GET /healthz", s.handleHealth)
	s.fleetRoutes()
	s.m.reg.MustRegister(s.deriveBacklog())
	s.fleetMetricsRoutes()
	s.mux.Handle("GET /metrics", s.admin(promhttp.HandlerFor(s.m.reg, promhttp.HandlerOpts{}).ServeHTTP))
	return s, nil
}

// Handler is the API, for tests and embedding.
func (s *Server) Handler() http.Handler { return s.mux }

// Serve answers on ln (TLS when cert is non-nil) until ctx is done, then
// lets running uploads finish for up to grace.
func (s *Server) Serve(ctx context.Context, ln net.Listener, cert *tls.Certificate, grace time.Duration) error {
	hs := &http.Server{Handler: s.mux, ReadHeaderTimeout: headerTimeout, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}
	if cert != nil {
		hs.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: certs.MinVersion}
		ln = tls.NewListener(ln, hs.TLSConfig)
	}
	// The deriver writes to the store: Serve returns only after it has
	// stopped, so that the caller may close the store (a run it did not
	// finish is derived at the next start).
	dctx, stopDerive := context.WithCancel(ctx)
	derived := make(chan struct{})
	go func() { defer close(derived); s.deriver(dctx) }()
	defer func() { stopDerive(); <-derived }()
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
			s.authFailed(w, code, "an admin token")
			return
		}
		h(w, r)
	}
}

// authFailed answers an authentication that did not pass with its own
// reason: no or an unknown token (401), the wrong kind (403), or the
// store unavailable to check it (503, retry later).
func (s *Server) authFailed(w http.ResponseWriter, code int, need string) {
	reason := "this endpoint needs " + need
	switch code {
	case http.StatusUnauthorized:
		reason = "no valid token: this endpoint needs " + need + " (Authorization: Bearer)"
	case http.StatusServiceUnavailable:
		s.retryAfter(w)
		reason = "the store is unavailable to check the token; retry later"
	}
	writeJSON(w, code, apiError{Error: http.StatusText(code), Reason: reason})
}

// retryAfter asks the client to come back after the configured pause.
func (s *Server) retryAfter(w http.ResponseWriter) {
	w.Header().Set("Retry-After", strconv.Itoa(int(s.cfg.Limits.RetryAfter.Seconds()+0.999)))
}

// authenticate returns the request's token, or the status to answer.
func (s *Server) authenticate(r *http.Request) (store.Token, int) {
	raw := bearer(r)
	if raw == "" {
		return store.Token{}, http.StatusUnauthorized
	}
	hash := HashToken(raw)
	now := time.Now()
	s.tokensMu.Lock()
	c, ok := s.tokens[hash]
	s.tokensMu.Unlock()
	if ok && now.Before(c.until) {
		return c.tok, 0
	}
	tok, err := s.cfg.Store.LookupToken(r.Context(), hash)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Token{}, http.StatusUnauthorized
	case err != nil:
		s.log.Error("token lookup", "err", err)
		return store.Token{}, http.StatusServiceUnavailable
	}
	s.tokensMu.Lock()
	if s.tokens == nil || len(s.tokens) >= maxCachedTokens {
		s.tokens = make(map[string]cachedToken)
	}
	s.tokens[hash] = cachedToken{tok, now.Add(TokenTTL)}
	s.tokensMu.Unlock()
	return tok, 0
}

// unavailable answers a store error 503 (507 when it is full) without
// its text, which may name files or hosts: that goes to the log.
func (s *Server) unavailable(w http.ResponseWriter, err error) {
	s.log.Warn("store unavailable", "err", err)
	if store.IsFull(err) {
		writeJSON(w, http.StatusInsufficientStorage, apiError{Error: "store full"})
		return
	}
	s.retryAfter(w)
	writeJSON(w, http.StatusServiceUnavailable, apiError{Error: "store unavailable", Reason: "see the collector's log"})
}

// handleHealth answers 200 only when this replica reaches both the index
// and the raw store, so a load balancer can drop it otherwise. The reason
// says which one failed, not why (no paths or addresses to the world).
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	st := map[string]string{"status": "ok", "index": "ok", "raw": "ok",
		"derive_backlog": strconv.Itoa(s.backlog.size())}
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
