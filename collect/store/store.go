// Package store is the collect server's index: runs, probes, their paths
// and tokens, in SQLite (the default, one file, WAL) or PostgreSQL (for
// fleets). The raw uploads themselves live on disk (package collect); the
// index says which file holds which run. Both backends run the same SQL
// (times are Unix nanoseconds) and pass one shared test suite.
package store

import (
	"context"
	"errors"
	"time"
)

// Errors callers branch on.
var (
	ErrNotFound = errors.New("not found")
	ErrExists   = errors.New("already exists")
)

// RawInline is the RawPath of a run whose raw body is in the database.
const RawInline = "inline"

// Outcome of storing a run's index row.
type Outcome int

const (
	Stored    Outcome = iota // new row committed
	Duplicate                // the same run_id with the same sha256 was already stored
	Conflict                 // the same run_id with other content was already stored
)

func (o Outcome) String() string {
	return [...]string{"stored", "duplicate", "conflict"}[o]
}

// Run is one upload's index row.
type Run struct {
	Seq           int64     `json:"seq"`
	RunID         string    `json:"run_id"`
	ProbeID       string    `json:"probe_id"`
	Command       string    `json:"command"`
	SchemaVersion string    `json:"schema_version"`
	Status        string    `json:"status"`
	Parsed        bool      `json:"parsed"`
	StartedAt     time.Time `json:"started_at"`
	FinishedAt    time.Time `json:"finished_at"`
	Records       int64     `json:"records"`
	Bytes         int64     `json:"bytes"`
	SHA256        string    `json:"sha256"`
	// RawPath is the raw upload's file under the data directory, or
	// RawInline when the body is kept in the database (GetRaw).
	RawPath string `json:"-"`
	// Raw, when RawPath is RawInline, is the body PutRun stores with the
	// row (not filled by reads: GetRaw).
	Raw         []byte    `json:"-"`
	ContentType string    `json:"content_type"`
	UploadPath  string    `json:"upload_path,omitempty"`
	StoredAt    time.Time `json:"stored_at"`
	Paths       []Path    `json:"paths,omitempty"`
}

// Path is one measured path of a run.
type Path struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
}

// Probe is an enrolled probe and what the server last heard from it.
type Probe struct {
	Name       string     `json:"name"`
	CreatedAt  time.Time  `json:"created_at"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
	LastSeen   *time.Time `json:"last_seen,omitempty"`
	Runs       int64      `json:"runs"`
	LastStatus string     `json:"last_status"`
	Backlog    int64      `json:"backlog"`
	Dropped    int64      `json:"dropped"`
}

// Token roles.
const (
	RoleProbe = "probe"
	RoleAdmin = "admin"
)

// Token is a credential as stored: only its hash.
type Token struct {
	Hash string
	Name string
	Role string
}

// RunFilter selects runs for GET /v1/runs; After is the last Seq seen.
// Since (inclusive) and Until (exclusive) bound a run's start time, or
// for a run the server could not parse, which has none, its stored time.
type RunFilter struct {
	Probe, Command string
	Since, Until   time.Time
	After          int64
	Limit          int
}

// Report is what a probe says about itself with an upload.
type Report struct {
	Probe   string
	Seen    time.Time
	Backlog int64 // results still in its spool
	Dropped int64 // results its spool quota dropped since the last report
}

// Store is the index. Every method is safe for concurrent use.
type Store interface {
	// PutRun commits r's index row (and its paths, and the probe's run
	// count, and rep about the probe) unless r.RunID is already stored, in which case it returns the
	// stored row and Duplicate or Conflict.
	PutRun(ctx context.Context, r Run, rep Report) (Run, Outcome, error)
	GetRun(ctx context.Context, runID string) (Run, error)
	// GetRaw returns the body of a run stored inline; ErrNotFound if none.
	GetRaw(ctx context.Context, runID string) ([]byte, error)
	ListRuns(ctx context.Context, f RunFilter) ([]Run, error)
	// AddProbe enrols a probe with its token; ErrExists if the name is taken.
	AddProbe(ctx context.Context, name, tokenHash string, now time.Time) error
	// AddAdmin stores an admin token.
	AddAdmin(ctx context.Context, name, tokenHash string, now time.Time) error
	// Revoke revokes every token of probe name (and the probe), never an
	// admin token of the same name; ErrNotFound if none.
	Revoke(ctx context.Context, name string, now time.Time) error
	// LookupToken returns the live token with this hash, or ErrNotFound.
	LookupToken(ctx context.Context, hash string) (Token, error)
	// Seen records a probe's report (last seen, spool backlog, drops).
	Seen(ctx context.Context, r Report) error
	ListProbes(ctx context.Context) ([]Probe, error)
	// PutDerived replaces a run's rows in the derived tables (survey cells
	// and probe records, pattern tests with per-path bytes).
	PutDerived(ctx context.Context, runID string, d Derived) error
	// PutDerivedStream is PutDerived with the rows given one at a time
	// to fill's sink (memory bounded whatever the run's size).
	PutDerivedStream(ctx context.Context, runID string, fill func(DerivedSink) error) error
	GetDerived(ctx context.Context, runID string) (Derived, error)
	// ListUnderived returns parsed runs after seq `after` whose derived
	// rows were never written, or never added to the roll-ups (a page;
	// empty at the end).
	ListUnderived(ctx context.Context, after int64) ([]Run, error)
	// PutSchedule stores the next revision of a probe's (or AnyProbe's)
	// fleet schedule (ErrNotFound for a probe not enrolled); GetSchedule
	// falls back to AnyProbe's.
	PutSchedule(ctx context.Context, probe string, body []byte) (int64, error)
	GetSchedule(ctx context.Context, probe string) (Schedule, error)
	// PutProbeStatus keeps what a probe last reported about itself (its
	// owner's caps, the tasks it refused); ProbeStatuses returns them all.
	PutProbeStatus(ctx context.Context, probe string, body []byte, now time.Time) error
	ProbeStatuses(ctx context.Context) (map[string][]byte, error)
	// Identity returns the shared TLS certificate and key (PEM), storing
	// create's pair when there is none yet.
	Identity(ctx context.Context, create func() (certPEM, keyPEM []byte, err error)) ([]byte, []byte, error)
	// Rollups calls fn with each roll-up row f chooses; the fleet views
	// read these, never the raw uploads. PutDerivedStream adds a run's
	// rows once (rollup.go).
	Rollups(ctx context.Context, f RollupFilter, fn func(Rollup) error) error
	// AddRollups adds rows as if their runs had been derived (synthetic
	// fleets in benchmarks and tests).
	AddRollups(ctx context.Context, rows []Rollup) error
	// ResetRollups empties the roll-ups for a rebuild (collect reindex).
	ResetRollups(ctx context.Context) error
	// PruneRollups removes hour rows of buckets before before.
	PruneRollups(ctx context.Context, before time.Time) error
	// Export streams the runs f selects and their derived rows.
	Export(ctx context.Context, f ExportFilter, sink ExportSink) error
	// Fleet reads the probes' last derived figures (fleet.go).
	Fleet(ctx context.Context) (Fleet, error)
	// PutSession keeps a fleet-page session (hash of its id) of the
	// admin token tokenHash until expires; LookupSession returns that
	// token while the session has not expired and the token is live
	// (ErrNotFound otherwise); DeleteSession ends it (logout).
	PutSession(ctx context.Context, hash, tokenHash string, expires time.Time) error
	LookupSession(ctx context.Context, hash string, now time.Time) (Token, error)
	DeleteSession(ctx context.Context, hash string) error
	// RevokeAdmin revokes every admin token of name (so its sessions end),
	// never a probe's; ErrNotFound if none.
	RevokeAdmin(ctx context.Context, name string, now time.Time) error
	// Quarantine hides a stored run from ListRuns, the deriver and
	// Export, keeping its row and raw upload; ErrNotFound if no such run.
	// Its probe's roll-ups of the run's day are emptied and the probe's
	// other runs of that day listed by ListUnderived, to be rolled up
	// again without it.
	Quarantine(ctx context.Context, runID, reason string, now time.Time) error
	Close() error
}
