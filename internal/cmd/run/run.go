// Package run implements `mptester run`.
package run

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/patterns"
	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/report"
)

// Options for `mptester run`.
type Options struct {
	IO     *cmdutil.IOStreams
	Logger *slog.Logger
	Ctx    context.Context

	Servers    []string
	Patterns   []string
	Transports []string
	Paths      []string
	DNS        []string // IFACE=ADDR[,ADDR]: the resolvers of a path
	Family     string
	Pin        string
	Insecure   bool
	ServerName string
	TCPPort    uint16
	QUICPort   uint16
	AltQUIC    uint16
	HTTP1      bool
	Seed       int64
	Pace       time.Duration
	Timeout    time.Duration
	Stable     bool
	Smoke      bool
	Output     string
	ProbeID    string
	Params     patterns.Params
	NoUpload   bool
	// Spool opens the upload spool (nil: none).
	Spool func(noUpload bool) (*cmdutil.Spooled, error)

	// Discover lists the paths (replaced in tests).
	Discover func(ctx context.Context) ([]probe.Path, error)
	// PollEvery, when set, is stable mode's safety re-discovery interval
	// (tests whose Discover fakes a change no kernel notification reports).
	PollEvery time.Duration
}

// Config is what the run document records as its configuration.
type Config struct {
	Servers    []string        `json:"servers"`
	Patterns   []string        `json:"patterns"`
	Transports []string        `json:"transports"`
	Paths      []string        `json:"paths"`
	DNS        []string        `json:"dns,omitempty"`
	Families   []int           `json:"families"`
	Seed       int64           `json:"seed"`
	Pace       time.Duration   `json:"pace_ns"`
	Timeout    time.Duration   `json:"timeout_ns"`
	Stable     bool            `json:"stable"`
	Smoke      bool            `json:"smoke"`
	TCPPort    uint16          `json:"tcp_port"`
	QUICPort   uint16          `json:"quic_port"`
	Pinned     bool            `json:"pinned"`
	Insecure   bool            `json:"insecure"`
	Params     patterns.Params `json:"params"`
}

// NewCmdRun builds the command; runF replaces runRun in tests.
func NewCmdRun(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Spool: f.Spool}
	opts.Discover = func(ctx context.Context) ([]probe.Path, error) { return f.DiscoverPaths(ctx, opts.DNS) }
	var tcpPort, quicPort, altPort int
	cmd := &cobra.Command{
		Use:   "run --server HOST[:PORT][,HOST...]",
		Short: "Run the traffic patterns over TCP, MPTCP and QUIC against a test server",
		Long: `Run the ping, bulk, iperf and interactive patterns (000 §II-A) over each
transport and path against an mptester test server, in a random order
(the seed is recorded), and print one JSON document.

A server name is resolved on each path by that path's own DNS servers
(discovered, or set with --dns IFACE=ADDR or in the config), through that
path, and the tests on a path use the address it resolved; each test
records how in server_resolution. A path without DNS servers falls back to
the system resolver (with a warning). The tests of a path that cannot
resolve the name end with status dns-error (naming the path and its DNS
servers) while the other paths run; a name no path resolves is an error.

With several servers, the one with the lowest median ping among those that
answered every ping is used. In stable mode (the default) the paths are
watched; if one appears, disappears or changes address the running test is
marked invalid ("network changed during test") and the run stops (exit 4).

--smoke runs every pattern briefly over every transport and exits 7 with
one line per failure: the CI smoke test of a test server.`,
		Example: `  mptester run --server test.example.net --pin 3A:...:9F
  mptester run --server 198.18.200.1 --insecure --paths wlan0,wwan0 --patterns bulk,iperf --transports mptcp,quic
  mptester run --smoke --server test.example.net:8443 --pin 3A:...:9F`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Logger, opts.Ctx = f.Logger, cmd.Context()
			for _, p := range []struct {
				v   int
				dst *uint16
				n   string
			}{{tcpPort, &opts.TCPPort, "tcp-port"}, {quicPort, &opts.QUICPort, "quic-port"}, {altPort, &opts.AltQUIC, "quic-alt-port"}} {
				if p.v < 0 || p.v > 65535 {
					return cmdutil.FlagErrorf("invalid --%s %d", p.n, p.v)
				}
				*p.dst = uint16(p.v)
			}
			if f.Config != nil {
				c := f.Config.Run
				fl := cmd.Flags()
				if !fl.Changed("server") && len(c.Servers) > 0 {
					opts.Servers = c.Servers
				}
				if !fl.Changed("patterns") && len(c.Patterns) > 0 {
					opts.Patterns = c.Patterns
				}
				if !fl.Changed("transports") && len(c.Transports) > 0 {
					opts.Transports = c.Transports
				}
				if !fl.Changed("paths") && len(c.Paths) > 0 {
					opts.Paths = c.Paths
				}
				if !fl.Changed("pin") && c.Pin != "" {
					opts.Pin = c.Pin
				}
			}
			opts.ProbeID = f.ProbeID()
			if runF != nil {
				return runF(opts)
			}
			return runRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&opts.Servers, "server", nil, "test `HOST[:PORT]`s; the port applies to TCP and QUIC")
	fl.StringSliceVar(&opts.Patterns, "patterns", nil, "`PATTERNS` to run (default: "+strings.Join(patterns.Names(), ",")+")")
	fl.StringSliceVar(&opts.Transports, "transports", nil, "`TRANSPORTS` (default: "+strings.Join(transport.Names, ",")+")")
	fl.StringSliceVar(&opts.Paths, "paths", nil, "`IFACES` to use (default: every up, non-loopback path with a default route)")
	fl.StringArrayVar(&opts.DNS, "dns", nil, "use `IFACE=ADDR[,ADDR]` as the resolvers of IFACE for the server name (repeatable)")
	fl.StringVar(&opts.Family, "family", "4", "address family: 4, 6 or both")
	fl.StringVar(&opts.Pin, "pin", "", "SHA-256 `FINGERPRINT` of the server certificate (as `mptester serve` prints it)")
	fl.BoolVar(&opts.Insecure, "insecure", false, "do not verify the server certificate")
	fl.StringVar(&opts.ServerName, "server-name", "", "TLS server `NAME` (default: the server host)")
	fl.IntVar(&tcpPort, "tcp-port", 443, "server TLS/TCP port")
	fl.IntVar(&quicPort, "quic-port", 443, "server QUIC port")
	fl.IntVar(&altPort, "quic-alt-port", 6121, "non-standard QUIC port checked by --smoke (0: skip)")
	fl.BoolVar(&opts.HTTP1, "http1", false, "HTTP/1.1 instead of HTTP/2 over TCP")
	fl.Int64Var(&opts.Seed, "seed", 0, "order of the tests (default: random, recorded in the output)")
	fl.DurationVar(&opts.Pace, "pace", time.Second, "pause between tests")
	fl.DurationVar(&opts.Timeout, "timeout", 0, "per-test timeout (default: from the pattern's duration)")
	fl.BoolVar(&opts.Stable, "stable", true, "stop the run when a path appears, disappears or changes address")
	fl.BoolVar(&opts.Smoke, "smoke", false, "run every pattern briefly; exit 7 listing failures")
	fl.StringVarP(&opts.Output, "output", "o", "-", "write the JSON document to `file` (- for stdout)")
	fl.BoolVar(&opts.NoUpload, "no-upload", false, "keep the result in the spool; `mptester upload` sends it later")
	fl.Int64Var(&opts.Params.Size, "size", patterns.DefaultBulkSize, "bulk download size in `bytes`")
	fl.DurationVar(&opts.Params.Duration, "duration", patterns.DefaultIperf, "iperf (each direction) and interactive duration")
	fl.IntVar(&opts.Params.ChunkSize, "chunk-size", patterns.DefaultChunk, "interactive chunk size in `bytes`")
	fl.DurationVar(&opts.Params.Interval, "interval", patterns.DefaultInterval, "interactive sending interval")
	fl.IntVar(&opts.Params.PingCount, "ping-count", patterns.DefaultPingCount, "requests of the ping pattern")
	fl.StringVar(&opts.Params.Direction, "iperf-direction", patterns.DirectionBoth, "iperf direction: both, upload or download")
	return cmd
}

func families(s string) ([]probe.Family, error) {
	f, err := probe.ParseFamily(s)
	if err != nil {
		return nil, cmdutil.FlagErrorf("--family: %v", err)
	}
	if f == probe.FamilyAny {
		return []probe.Family{probe.Family4, probe.Family6}, nil
	}
	return []probe.Family{f}, nil
}

func runRun(opts *Options) error {
	ctx := opts.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	if len(opts.Servers) == 0 {
		return cmdutil.FlagErrorf("--server is required")
	}
	if opts.Pin != "" {
		if _, err := transport.ParseFingerprint(opts.Pin); err != nil {
			return cmdutil.FlagErrorf("--pin: %v", err)
		}
	}
	if opts.Smoke && len(opts.Servers) != 1 {
		return cmdutil.FlagErrorf("--smoke checks one server")
	}
	if len(opts.Patterns) == 0 {
		opts.Patterns = patterns.Names()
	}
	if len(opts.Transports) == 0 {
		opts.Transports = slices.Clone(transport.Names)
	}
	for _, p := range opts.Patterns {
		if _, err := patterns.Get(p); err != nil {
			return cmdutil.FlagErrorf("--patterns: %v", err)
		}
	}
	for _, t := range opts.Transports {
		if !slices.Contains(transport.Names, t) {
			return cmdutil.FlagErrorf("--transports: unknown transport %q (want %s)", t, strings.Join(transport.Names, ", "))
		}
	}
	p := opts.Params
	if p.Size <= 0 || p.Duration <= 0 || p.Interval <= 0 || p.ChunkSize < 4 || p.PingCount < 2 {
		return cmdutil.FlagErrorf("--size, --duration, --interval must be positive, --chunk-size >= 4, --ping-count >= 2")
	}
	switch p.Direction {
	case patterns.DirectionBoth, patterns.DirectionUpload, patterns.DirectionDownload:
	default:
		return cmdutil.FlagErrorf("--iperf-direction %q (want both, upload or download)", p.Direction)
	}
	fams, err := families(opts.Family)
	if err != nil {
		return err
	}
	all, err := opts.Discover(ctx)
	if err != nil {
		return err
	}
	paths, err := cmdutil.SelectPaths(all, opts.Paths)
	if err != nil {
		return err
	}
	if opts.Seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		opts.Seed = int64(binary.BigEndian.Uint64(b[:]) >> 1)
	}
	if opts.Smoke {
		opts.Params.Size = min(opts.Params.Size, 1<<20)
		opts.Params.Duration = min(opts.Params.Duration, time.Second)
		opts.Pace = 0
		opts.Stable = false
	}
	cfg := Config{Servers: opts.Servers, Patterns: opts.Patterns, Transports: opts.Transports, Paths: names(paths), DNS: opts.DNS,
		Seed: opts.Seed, Pace: opts.Pace, Timeout: opts.Timeout, Stable: opts.Stable, Smoke: opts.Smoke,
		TCPPort: opts.TCPPort, QUICPort: opts.QUICPort, Pinned: opts.Pin != "", Insecure: opts.Insecure, Params: opts.Params}
	for _, f := range fams {
		cfg.Families = append(cfg.Families, int(f))
	}
	spooled, err := cmdutil.OpenSpool(opts.Spool, opts.NoUpload)
	if err != nil {
		return err
	}
	hdr, err := report.NewHeader("run", opts.ProbeID, paths, cfg)
	if err != nil {
		return err
	}
	if err := spooled.Start(hdr.RunID, ".json"); err != nil {
		return err
	}
	doc := report.Document{Header: hdr, Records: []json.RawMessage{}}
	ro := patterns.RunOptions{Servers: opts.Servers, TCPPort: opts.TCPPort, QUICPort: opts.QUICPort,
		Patterns: opts.Patterns, Transports: opts.Transports, Paths: paths, Families: fams, Params: opts.Params,
		Seed: opts.Seed, Pace: opts.Pace, Timeout: opts.Timeout, Stable: opts.Stable, Discover: opts.Discover, PollEvery: opts.PollEvery,
		HTTP1: opts.HTTP1, Logger: opts.Logger,
		TLS: func(host string) (*tls.Config, error) {
			name := opts.ServerName
			if name == "" {
				name = host
			}
			return transport.ClientTLS(name, opts.Pin, opts.Insecure)
		},
		Emit: func(rec any) error {
			b, err := json.Marshal(rec)
			if err != nil {
				return fmt.Errorf("encode record: %w", err)
			}
			doc.Records = append(doc.Records, b)
			return nil
		}}
	sum, runErr := patterns.Run(ctx, ro)
	var smokeFails []string
	if opts.Smoke && runErr == nil && opts.AltQUIC != 0 && slices.Contains(opts.Transports, transport.QUIC) {
		// 000 §III: QUIC on a non-standard port reveals middleboxes that
		// treat UDP 443 specially.
		alt := ro
		alt.QUICPort, alt.Patterns, alt.Transports = opts.AltQUIC, []string{"ping"}, []string{transport.QUIC}
		alt.Servers = []string{hostOnly(opts.Servers[0])}
		alt.TCPPort = opts.TCPPort
		s2, err := patterns.Run(ctx, alt)
		if err != nil {
			smokeFails = append(smokeFails, fmt.Sprintf("quic port %d: %v", opts.AltQUIC, err))
		}
		for _, r := range s2.Failed {
			smokeFails = append(smokeFails, fmt.Sprintf("ping/quic port %d: %s: %s", opts.AltQUIC, r.Status, r.Error))
		}
	}

	doc.FinishedAt = time.Now().UTC()
	var exitErr error
	switch {
	case runErr != nil && errors.Is(runErr, context.Canceled):
		doc.Status, doc.Reason = report.StatusPartial, "cancelled"
		exitErr = fmt.Errorf("%w: %w", cmdutil.ErrCancelled, runErr)
	case runErr != nil:
		doc.Status, doc.Reason = report.StatusError, runErr.Error()
		exitErr = runErr
		if opts.Smoke {
			smokeFails = append(smokeFails, runErr.Error())
		}
	case sum.Invalid:
		doc.Status, doc.Reason = report.StatusInvalid, sum.Reason
		exitErr = fmt.Errorf("%w: %s", cmdutil.ErrInvalid, sum.Reason)
	case len(sum.Failed) > 0:
		doc.Status, doc.Reason = report.StatusPartial, fmt.Sprintf("%d of %d tests failed", len(sum.Failed), sum.Tests)
		exitErr = fmt.Errorf("%w: %s", cmdutil.ErrPartial, doc.Reason)
	default:
		doc.Status = report.StatusOK
	}
	if opts.Smoke {
		for _, r := range sum.Failed {
			c := r.Config
			smokeFails = append(smokeFails, fmt.Sprintf("%s/%s over %s (IPv%d): %s: %s", c.Pattern, c.Transport, c.Path, c.Family, r.Status, r.Error))
		}
		for _, r := range sum.All {
			// A server that silently falls back to TCP fails the MPTCP check.
			if c := r.Config; r.Status == patterns.StatusSuccess && r.MPTCP != nil && !r.MPTCP.Negotiated {
				smokeFails = append(smokeFails, fmt.Sprintf("%s/%s over %s (IPv%d): MPTCP not negotiated (server fell back to TCP)", c.Pattern, c.Transport, c.Path, c.Family))
			}
		}
		if len(smokeFails) > 0 {
			for _, l := range smokeFails {
				fmt.Fprintf(opts.IO.ErrOut, "FAIL %s\n", l)
			}
			doc.Status, doc.Reason = report.StatusError, fmt.Sprintf("%d smoke checks failed", len(smokeFails))
			exitErr = fmt.Errorf("%w: %s", cmdutil.ErrCheckFailed, doc.Reason)
		} else {
			exitErr = nil
			fmt.Fprintf(opts.IO.ErrOut, "smoke: %d checks passed against %s\n", sum.Tests, sum.Selected)
		}
	}
	if err := writeDoc(opts, doc); err != nil {
		return err
	}
	if err := cmdutil.WriteJSON(spooled.Writer(), doc); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	return spooled.Finish(ctx, exitErr)
}

func hostOnly(s string) string {
	if i := strings.LastIndex(s, ":"); i > 0 && !strings.HasSuffix(s, "]") && strings.Count(s, ":") == 1 {
		return s[:i]
	}
	if strings.HasPrefix(s, "[") {
		if i := strings.Index(s, "]"); i > 0 {
			return s[1:i]
		}
	}
	return s
}

func names(ps []probe.Path) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

func writeDoc(opts *Options, doc report.Document) error {
	var w io.Writer = opts.IO.Out
	if opts.Output != "" && opts.Output != "-" {
		f, err := os.Create(opts.Output)
		if err != nil {
			return fmt.Errorf("%w: %w", cmdutil.ErrUsage, err)
		}
		defer f.Close()
		w = f
	}
	return cmdutil.WriteJSON(w, doc)
}
