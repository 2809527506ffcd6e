// Package collect implements `mptester collect`: the upload server and its
// probe enrolment.
package collect

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/collect/rawstore"
	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/internal/certs"
	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/internal/config"
)

// Options for `mptester collect` and its subcommands.
type Options struct {
	IO     *cmdutil.IOStreams
	Logger *slog.Logger

	DB        string
	Data      string
	Raw       rawstore.Flags
	InlineMax int64
	Listen    string
	CertFile  string
	KeyFile   string
	Names     []string
	PlainHTTP bool
	Limits    collect.Limits
	// Drain bounds the uploads in flight at SIGTERM/SIGINT.
	Drain time.Duration

	// Ready, when set, is called with the listening address (tests).
	Ready func(net.Addr)
}

// NewCmdCollect builds the command tree; runF replaces collectRun in tests.
func NewCmdCollect(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Limits: collect.DefaultLimits()}
	cmd := &cobra.Command{
		Use:   "collect",
		Short: "Run the server probes upload their results to",
		Long: `Receive results from enrolled probes over HTTPS:

  PUT /v1/runs/{run_id}   one run (JSON document or JSON Lines; gzip or zstd),
                          validated while it streams, stored raw and indexed
                          before the 2xx receipt; a probe token only
  GET /v1/runs            ?probe=&type=&since=&until=&after=&limit= (admin)
  GET /v1/runs/{run_id}   the raw upload, byte-identical (admin)
  GET /v1/probes          last seen, runs, last status, spool backlog (admin)
  GET /healthz, /metrics  (metrics: admin; healthz 503 unless index and raw store answer)

The index is a SQLite file in --data (WAL, no cgo) unless --db names a
PostgreSQL server (postgres://…); raw uploads live in --data, or in an
S3-compatible bucket with --raw s3://BUCKET/PREFIX. Replicas: several
collectors on one PostgreSQL and one bucket serve one fleet (they share
tokens, schedules and the self-signed identity); /healthz says whether
this one reaches both stores; collect gc removes raw objects no index row
names.
Without --cert/--key the collector uses a self-signed certificate created
once and kept (in the PostgreSQL database, shared by replicas, or else in
--data as tls-identity.pem, mode 0600), so restarts do not change it; its
SHA-256 fingerprint is printed at every start and by "probe add", and
probes pin it (upload: pin:). Delete it only to change the identity:
every probe must then be re-pinned.

SIGTERM/SIGINT drain: the listener closes (new uploads are refused), the
uploads in flight finish within --drain, then it exits 0.`,
		Example: `  mptester collect --data /var/lib/mptester-collect
  mptester collect probe add pi-kitchen --url https://collect.example.net:8080
  mptester collect --db postgres://collect@db/collect --cert cert.pem --key key.pem`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			opts.Logger = f.Logger
			return cmdutil.Dispatch(ctx, opts, runF, collectRun)
		},
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&opts.Data, "data", "mptester-collect", "`directory` for raw uploads (and the SQLite index)")
	pf.StringVar(&opts.DB, "db", "", "index `DSN`: postgres://… or a SQLite file (default DATA/collect.db)")
	opts.Raw.Add(pf)
	pf.Int64Var(&opts.InlineMax, "raw-inline-max", collect.DefaultInlineMax, "uploads up to this many `bytes` are kept in the index database (0: none)")
	fl := cmd.Flags()
	fl.StringVar(&opts.Listen, "listen", ":8080", "`ADDR` to listen on")
	fl.StringVar(&opts.CertFile, "cert", "", "PEM certificate `file` (default: self-signed)")
	fl.StringVar(&opts.KeyFile, "key", "", "PEM private key `file`")
	fl.StringSliceVar(&opts.Names, "name", nil, "extra DNS `NAME`s or IPs for the self-signed certificate")
	fl.BoolVar(&opts.PlainHTTP, "plain-http", false, "serve HTTP without TLS (behind a TLS-terminating proxy, or in tests)")
	fl.Int64Var(&opts.Limits.MaxBytes, "max-bytes", opts.Limits.MaxBytes, "largest upload in `bytes` (compressed and uncompressed)")
	fl.Int64Var(&opts.Limits.MaxDocument, "max-document", opts.Limits.MaxDocument, "largest run sent as one JSON document, in `bytes`")
	fl.IntVar(&opts.Limits.MaxInFlight, "max-inflight", opts.Limits.MaxInFlight, "uploads at once (more are answered 429)")
	fl.DurationVar(&opts.Drain, "drain", 10*time.Second, "on SIGTERM: how long uploads in flight may take to finish (below systemd's TimeoutStopSec)")
	fl.IntVar(&opts.Limits.MaxPerProbe, "max-inflight-probe", opts.Limits.MaxPerProbe, "uploads at once from one probe (more are answered 429)")
	fl.DurationVar(&opts.Limits.RetryAfter, "retry-after", opts.Limits.RetryAfter, "what a 429 asks probes to wait")
	fl.Int64Var(&opts.Limits.MinRate, "min-rate", opts.Limits.MinRate, "slowest upload body taken, in `bytes/s` over --rate-window (slower: 408)")
	fl.DurationVar(&opts.Limits.RateWindow, "rate-window", opts.Limits.RateWindow, "the window --min-rate is measured over")
	fl.DurationVar(&opts.Limits.MaxUploadTime, "upload-timeout", opts.Limits.MaxUploadTime, "longest one upload body may take (408)")
	fl.IntVar(&opts.Limits.MaxZstd, "max-zstd", opts.Limits.MaxZstd, "zstd bodies decoded at once (each may hold an 8 MiB window); more wait")

	schedule := &cobra.Command{Use: "schedule", Short: "The fleet schedule probes run with `mptester agent`"}
	schedule.AddCommand(NewCmdScheduleSet(f, opts, nil), NewCmdScheduleKeygen(f, nil), NewCmdScheduleSign(f, nil))
	cmd.AddCommand(schedule)
	cmd.AddCommand(newCmdProbe(f, opts), newCmdAdmin(f, opts), NewCmdExport(f, opts, nil), NewCmdGC(f, opts, nil), NewCmdReindex(f, opts, nil))
	cmd.AddCommand(newCmdRun(f, opts))
	return cmd
}

func newCmdProbe(f *cmdutil.Factory, opts *Options) *cobra.Command {
	cmd := &cobra.Command{Use: "probe", Short: "Enrol, list and revoke probes"}
	cmd.AddCommand(NewCmdProbeAdd(f, opts, nil), NewCmdProbeRevoke(f, opts, nil), NewCmdProbeList(f, opts, nil))
	return cmd
}

func newCmdAdmin(f *cmdutil.Factory, opts *Options) *cobra.Command {
	cmd := &cobra.Command{Use: "admin", Short: "Admin tokens for the read and management endpoints"}
	cmd.AddCommand(NewCmdAdminAdd(f, opts, nil), NewCmdAdminRevoke(f, opts, nil))
	return cmd
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func checkName(n string) error {
	if !namePattern.MatchString(n) {
		return cmdutil.FlagErrorf("invalid name %q: 1-64 letters, digits, '.', '_' or '-'", n)
	}
	return nil
}

// keepIdentity returns the collector's self-signed identity, kept in
// --data so that a restart does not change what probes pin; the first
// start (or `probe add`) creates it.
func keepIdentity(ctx context.Context, opts *Options) (tls.Certificate, string, error) {
	if err := os.MkdirAll(opts.Data, 0o750); err != nil {
		return tls.Certificate{}, "", fmt.Errorf("data directory: %w", err)
	}
	st := certs.IdentityIn(opts.Data)
	c, fp, created, err := certs.Keep(ctx, st, opts.Names)
	if err != nil {
		return c, fp, err
	}
	if created {
		fmt.Fprintf(opts.IO.Out, "created the collector's TLS identity in %s (keep it: probes pin its fingerprint)\n", st)
	} else if missing := certs.Missing(c.Leaf, opts.Names); len(missing) > 0 && opts.Logger != nil {
		opts.Logger.Warn("the kept certificate does not name these; probes that pin it do not care, others need --cert/--key", "names", missing, "identity", st.String())
	}
	return c, fp, nil
}

func (o *Options) dsn() string {
	if o.DB != "" {
		return o.DB
	}
	return filepath.Join(o.Data, "collect.db")
}

// The subcommands that work on the collector's stores take collect's
// options (co): the stores its persistent flags name (--data, --db,
// --raw, ...) are parsed there and shared by every subcommand.

// StoreOptions of the subcommands that need nothing but the stores:
// probe list, reindex.
type StoreOptions struct {
	IO      *cmdutil.IOStreams
	Collect *Options // the stores
}

// NameOptions of the subcommands that act on one NAME in the stores:
// admin add, probe revoke.
type NameOptions struct {
	IO      *cmdutil.IOStreams
	Collect *Options // the stores
	Name    string
}

// leafCmd finishes cmd as one of collect's subcommands: it requires
// exactly as many arguments as args names and, when run, stores the
// arguments in args and hands opts to runF (a test's) or run.
func leafCmd[O any](cmd *cobra.Command, opts *O, runF, run func(context.Context, *O) error, args ...*string) *cobra.Command {
	cmd.Args = cobra.NoArgs
	if len(args) > 0 {
		cmd.Args = cobra.ExactArgs(len(args))
	}
	cmd.RunE = func(c *cobra.Command, a []string) error {
		for i, p := range args {
			*p = a[i]
		}
		return cmdutil.Dispatch(c.Context(), opts, runF, run)
	}
	return cmd
}

// storeCmd is a leafCmd on collect's stores: the stores log through the
// logger the root command set up.
func storeCmd[O any](f *cmdutil.Factory, co *Options, cmd *cobra.Command, opts *O, runF, run func(context.Context, *O) error, args ...*string) *cobra.Command {
	cmd.PreRun = func(*cobra.Command, []string) { co.Logger = f.Logger }
	return leafCmd(cmd, opts, runF, run, args...)
}

func withStore(ctx context.Context, opts *Options, fn func(store.Store) error) error {
	if err := os.MkdirAll(opts.Data, 0o750); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	st, err := store.Open(ctx, opts.dsn())
	if err != nil {
		return err
	}
	defer st.Close()
	return fn(st)
}

func collectRun(ctx context.Context, opts *Options) error {
	if (opts.CertFile == "") != (opts.KeyFile == "") {
		return cmdutil.FlagErrorf("--cert and --key go together")
	}
	if opts.PlainHTTP && opts.CertFile != "" {
		return cmdutil.FlagErrorf("--plain-http and --cert exclude each other")
	}
	var ch config.Checker
	l := opts.Limits
	ch.Check("--max-bytes", config.Positive(l.MaxBytes))
	ch.Check("--max-document", config.Positive(l.MaxDocument))
	ch.Check("--max-inflight", config.Positive(l.MaxInFlight))
	ch.Check("--retry-after", config.Positive(l.RetryAfter))
	ch.Check("--drain", config.Positive(opts.Drain))
	ch.Check("--max-inflight-probe", config.Positive(l.MaxPerProbe))
	ch.Check("--min-rate", config.Positive(l.MinRate))
	ch.Check("--rate-window", config.Positive(l.RateWindow))
	ch.Check("--upload-timeout", config.Positive(l.MaxUploadTime))
	ch.Check("--max-zstd", config.Positive(l.MaxZstd))
	if err := ch.Err(); err != nil {
		return cmdutil.Usage(err)
	}
	if _, err := opts.rawConfig(); err != nil {
		return err
	}
	var cert *tls.Certificate
	if !opts.PlainHTTP {
		var (
			c   tls.Certificate
			fp  string
			err error
		)
		if opts.CertFile != "" {
			if c, fp, err = certs.Load(opts.CertFile, opts.KeyFile); err != nil {
				return fmt.Errorf("%w: %w", cmdutil.ErrUsage, err)
			}
		} else if store.IsPostgres(opts.dsn()) {
			// Replicas on one database present one identity, kept there.
			if c, fp, err = sharedIdentity(ctx, opts); err != nil {
				return err
			}
		} else if c, fp, err = keepIdentity(ctx, opts); err != nil {
			return err
		}
		cert = &c
		fmt.Fprintf(opts.IO.Out, "certificate SHA-256 fingerprint: %s\n", fp)
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if errors.Is(err, os.ErrPermission) {
		return cmdutil.ListenError(fmt.Errorf("--listen %s: %w", opts.Listen, err))
	} else if err != nil {
		return cmdutil.FlagErrorf("--listen %s: %v", opts.Listen, err)
	}
	defer ln.Close()
	return withStore(ctx, opts, func(st store.Store) error {
		raw, err := opts.rawBackend()
		if err != nil {
			return err
		}
		srv, err := collect.New(collect.Config{Store: st, Data: opts.Data, Raw: raw, InlineMax: opts.inlineMax(), Limits: opts.Limits, Logger: opts.Logger})
		if err != nil {
			return err
		}
		scheme := map[bool]string{true: "http", false: "https"}[cert == nil]
		fmt.Fprintf(opts.IO.Out, "listening on %s://%s (index %s, raw uploads in %s)\n", scheme, ln.Addr(), redact(opts.dsn()), raw)
		if opts.Ready != nil {
			opts.Ready(ln.Addr())
		}
		err = srv.Serve(ctx, ln, cert, opts.Drain)
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("uploads still in flight after --drain %s were cut (not stored: their probes send them again)", opts.Drain)
		}
		return err
	})
}

// redact hides a DSN's password.
func redact(dsn string) string {
	re := regexp.MustCompile(`(://[^:/@]+:)[^@]*@`)
	return re.ReplaceAllString(dsn, "${1}***@")
}
