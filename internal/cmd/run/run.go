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
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/capture"
	"github.com/mptester/mptester/internal/certs"
	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/internal/config"
	"github.com/mptester/mptester/mpquic"
	"github.com/mptester/mptester/patterns"
	"github.com/mptester/mptester/patterns/mobile"
	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/probe/doctor"
	"github.com/mptester/mptester/probe/nw"
	"github.com/mptester/mptester/report"
)

// Options for `mptester run`.
type Options struct {
	IO     *cmdutil.IOStreams
	Logger *slog.Logger

	Servers    []string
	Patterns   []string
	Transports []string
	Paths      []string
	Backup     []string // paths a multipath transport uses only as backups
	DNS        []string // IFACE=ADDR[,ADDR]: the resolvers of a path
	Family     string
	Pin        string
	Insecure   bool
	ServerName string
	// NoPrivate refuses private, local and special-purpose server
	// addresses at each dial, on each path (PublicPrefixes excepted).
	NoPrivate      bool
	PublicPrefixes []string
	// Ports per listening transport (--<transport>-port); AltPorts the
	// second ports --smoke checks (--<transport>-alt-port, 0: skip).
	Ports    map[string]uint16
	AltPorts map[string]uint16
	HTTP1    bool
	QlogDir  string
	// MPQUICCC is mpquic's congestion control (--mpquic-cc).
	MPQUICCC string
	// QUICECN records quic-go's ECN per quic connection (--quic-ecn).
	QUICECN bool
	Seed    int64
	Pace    time.Duration
	Timeout time.Duration
	// ConnectTimeout bounds each connect and handshake, apart from Timeout.
	ConnectTimeout time.Duration
	// StallTimeout ends an HTTP transfer that receives nothing this long.
	StallTimeout time.Duration
	Stable       bool
	Smoke        bool
	// Mode is "stable" (the pattern matrix) or "mobile" (000 §II-A: the
	// interactive pattern over every handover transport at once until the
	// primary path is lost).
	Mode string
	// DurationSet: --duration was given (mobile mode's default differs).
	DurationSet bool
	Mobile      patterns.MobileOptions
	Output      string
	// JUnit is --junit: the tests as JUnit XML, rewritten after each test.
	JUnit string
	// GitHub: running in GitHub Actions (GITHUB_ACTIONS=true): failures
	// as annotations, the summary appended to StepSummary.
	GitHub      bool
	StepSummary string
	ConfigFile  string // an input the output must not overwrite
	ProbeID     string
	Params      patterns.Params
	NoUpload    bool
	// Spool opens the upload spool (nil: none).
	Spool func(noUpload bool) (*cmdutil.Spooled, error)

	// MPTCPService is --mptcp-service (macOS); MPTCPServiceSet says it
	// was given.
	MPTCPService    string
	MPTCPServiceSet bool

	// Endpoints reads the host's MPTCP endpoints (replaced in tests).
	Endpoints func(ctx context.Context) []doctor.MPTCPEndpoint
	// Discover lists the paths (replaced in tests).
	Discover func(ctx context.Context) ([]probe.Path, error)
	// PollEvery, when set, is stable mode's safety re-discovery interval
	// (tests whose Discover fakes a change no kernel notification reports).
	PollEvery time.Duration
}

// Config is what the run document records as its configuration.
type Config struct {
	Servers    []string      `json:"servers"`
	Patterns   []string      `json:"patterns"`
	Transports []string      `json:"transports"`
	Paths      []string      `json:"paths"`
	Backup     []string      `json:"backup,omitempty"`
	DNS        []string      `json:"dns,omitempty"`
	Families   []int         `json:"families"`
	Seed       int64         `json:"seed"`
	Pace       time.Duration `json:"pace_ns"`
	Timeout    time.Duration `json:"timeout_ns"`
	// ConnectTimeout bounds each connect and handshake.
	ConnectTimeout time.Duration `json:"connect_timeout_ns"`
	Stable         bool          `json:"stable"`
	Smoke          bool          `json:"smoke"`
	Mode           string        `json:"mode,omitempty"`
	// Mobile mode's grace time and Table I thresholds.
	Mobile *patterns.MobileOptions `json:"mobile,omitempty"`
	// Ports per listening transport.
	Ports    map[string]uint16 `json:"ports"`
	Pinned   bool              `json:"pinned"`
	Insecure bool              `json:"insecure"`
	Params   patterns.Params   `json:"params"`
	// MPTCPService is Network.framework's multipath service of mptcp
	// (macOS only).
	MPTCPService string `json:"mptcp_service,omitempty"`
}

// mptcpServiceApplies: --mptcp-service means something on macOS only
// (Network.framework); replaced in tests.
var mptcpServiceApplies = runtime.GOOS == "darwin"

// mptcpService is the service mptcp dials with: the checked flag on macOS,
// 0 elsewhere (the transport ignores it off Network.framework).
func mptcpService(opts *Options) nw.Service {
	if !mptcpServiceApplies {
		return 0
	}
	s, _ := nw.ParseService(opts.MPTCPService)
	return s
}

// NewCmdRun builds the command; runF replaces runRun in tests.
func NewCmdRun(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Spool: f.Spool, Endpoints: doctor.ReadEndpoints}
	opts.Discover = func(ctx context.Context) ([]probe.Path, error) { return f.DiscoverPaths(ctx, opts.DNS) }
	portFlags, altFlags := map[string]*int{}, map[string]*int{}
	var trHelp strings.Builder
	for _, d := range transport.All() {
		fmt.Fprintf(&trHelp, "  %-6s %s\n", d.Name, d.Help)
	}
	cmd := &cobra.Command{
		Use:   "run --server HOST[:PORT][,HOST...]",
		Short: "Run the traffic patterns over every transport against a test server",
		Long: `Run the ping, bulk, iperf and interactive patterns (000 §II-A) over each
transport and path against an mptester test server, in a random order
(the seed is recorded), and print one JSON document. The transports:

` + trHelp.String() + `
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
one line per failure: the CI smoke test of a test server.

--mode mobile (000 §II-A, §IV) runs the interactive pattern over every
handover transport at once (` + strings.Join(patterns.HandoverTransports(), ", ") + `), each with its own
connections, with the --backup path (MPTCP: the host's backup endpoint) as
the backup, until the kernel says the primary path is lost plus --grace, or
--duration (default 60s). A mobile_summary record gives per transport the
handover (first data on the backup, the last packet sent and received on
the primary, the duration by both definitions, negative when abrupt; status
no-backup when no path is a backup), its cause (Table I: rtt-threshold,
under-rto, rto-threshold, other; --rtt-threshold, --rto-threshold), the
delays up and down, bytes per path, the 100 ms path-state samples, and
MPTCP's max-delay ratio to each other transport (000 Fig. 8).`,
		Example: `  mptester run --server test.example.net --pin 3A:...:9F
  mptester run --server 198.18.200.1 --insecure --paths wlan0,wwan0 --patterns bulk,iperf --transports mptcp,quic
  mptester run --smoke --server test.example.net:8443 --pin 3A:...:9F
  mptester run --mode mobile --server test.example.net --pin 3A:...:9F --paths wlan0,wwan0 --backup wwan0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Logger = f.Logger
			var ch config.Checker
			opts.Ports, opts.AltPorts = map[string]uint16{}, map[string]uint16{}
			for _, fl := range []struct {
				flags map[string]*int
				dst   map[string]uint16
				n     string
				lo    int
			}{{portFlags, opts.Ports, "port", 1}, {altFlags, opts.AltPorts, "alt-port", 0}} {
				for _, name := range slices.Sorted(maps.Keys(fl.flags)) {
					v := *fl.flags[name]
					ch.Check("--"+name+"-"+fl.n, config.IntIn(v, fl.lo, 65535))
					fl.dst[name] = uint16(v)
				}
			}
			applyConfig(opts, f.Config, cmd.Flags().Changed)
			opts.DurationSet = cmd.Flags().Changed("duration")
			opts.MPTCPServiceSet = cmd.Flags().Changed("mptcp-service")
			opts.ConfigFile = f.Config.File()
			if err := ch.Err(); err != nil {
				return cmdutil.Usage(err)
			}
			opts.ProbeID = f.ProbeID()
			opts.GitHub = os.Getenv("GITHUB_ACTIONS") == "true"
			opts.StepSummary = os.Getenv("GITHUB_STEP_SUMMARY")
			return cmdutil.Dispatch(cmd.Context(), opts, runF, runRun)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&opts.Servers, "server", nil, "test `HOST[:PORT]`s; the port applies to every transport")
	fl.StringSliceVar(&opts.Patterns, "patterns", nil, "`PATTERNS` to run (default: "+strings.Join(patterns.Names(), ",")+")")
	fl.StringSliceVar(&opts.Transports, "transports", nil, "`TRANSPORTS` (default: "+strings.Join(transport.Names(), ",")+")")
	fl.StringSliceVar(&opts.Paths, "paths", nil, "`IFACES` to use (default: every up, non-loopback path with a default route)")
	fl.StringSliceVar(&opts.Backup, "backup", nil, "`IFACES` a multipath transport uses only as backup paths (the others are available, the first primary); MPTCP takes backup roles from the host's endpoints, so they must agree (default: the host's)")
	fl.StringArrayVar(&opts.DNS, "dns", nil, "use `IFACE=ADDR[,ADDR]` as the resolvers of IFACE for the server name (repeatable)")
	fl.StringVar(&opts.Family, "family", "4", "address family: 4, 6 or both")
	fl.StringVar(&opts.Pin, "pin", "", "SHA-256 `FINGERPRINT` of the server certificate (as `mptester serve` prints it)")
	fl.BoolVar(&opts.Insecure, "insecure", false, "do not verify the server certificate")
	fl.StringVar(&opts.ServerName, "server-name", "", "TLS server `NAME` (default: the server host)")
	fl.BoolVar(&opts.NoPrivate, "no-private", false, "refuse private, loopback, link-local, CGNAT, metadata and this host's own subnets as server addresses, and IPv6 ones embedding them (NAT64, IPv4-compatible): checked at each dial on each path (the fleet agent's default)")
	fl.StringArrayVar(&opts.PublicPrefixes, "public-prefix", nil, "with --no-private: treat `PREFIX` as public despite the bogon table (repeatable)")
	for _, d := range transport.Listeners() {
		portFlags[d.Name] = fl.Int(d.Name+"-port", int(d.DefaultPort), "server "+d.Help+" port")
		if d.AltPort != 0 {
			altFlags[d.Name] = fl.Int(d.Name+"-alt-port", int(d.AltPort), "non-standard "+d.Help+" port checked by --smoke and when a handshake fails (cause udp-blocked:PORT; 0: skip)")
		}
	}
	fl.BoolVar(&opts.HTTP1, "http1", false, "HTTP/1.1 instead of HTTP/2 over TCP")
	fl.StringVar(&opts.MPTCPService, "mptcp-service", nw.DefaultService.String(), "macOS: Network.framework's multipath `SERVICE` for mptcp: "+strings.Join(nw.ServiceNames, ", ")+" (aggregate needs a developer setting on the Mac); rejected on Linux, whose kernel path manager decides")
	fl.StringVar(&opts.QlogDir, "qlog", "", "write a qlog trace of every QUIC connection (quic, quic-handover, mpquic) to `DIR`/ODCID_client.sqlog")
	fl.StringVar(&opts.MPQUICCC, "mpquic-cc", string(mpquic.CongestionCUBIC), "mpquic's congestion control of the paths it sends on: cubic, newreno, or lia (coupled, RFC 6356)")
	fl.BoolVar(&opts.QUICECN, "quic-ecn", false, "record quic-go's ECN validation and CE counts on each quic connection (mpquic always records them per path); quic-go reports them only by tracing every packet, which costs it about 5% CPU per byte")
	fl.Int64Var(&opts.Seed, "seed", 0, "order of the tests (default: random, recorded in the output)")
	fl.DurationVar(&opts.Pace, "pace", time.Second, "pause between tests")
	fl.DurationVar(&opts.Timeout, "timeout", 0, "per-test timeout (default: from the pattern's duration)")
	fl.DurationVar(&opts.ConnectTimeout, "connect-timeout", 5*time.Second, "limit on each connect and TLS/QUIC handshake, apart from --timeout")
	fl.DurationVar(&opts.StallTimeout, "stall-timeout", patterns.DefaultStallTimeout, "end an HTTP transfer (ping, bulk) that receives nothing for this long")
	fl.BoolVar(&opts.Stable, "stable", true, "stop the run when a path appears, disappears or changes address")
	fl.BoolVar(&opts.Smoke, "smoke", false, "run every pattern briefly; exit 7 listing failures")
	fl.BoolVar(&opts.Mobile.Capture, "capture", true, "mobile mode: capture the test flows on the paths (AF_PACKET, needs CAP_NET_RAW) for the handover times and bytes per interface; false: from the 100 ms samples")
	fl.StringVar(&opts.Mobile.PcapDir, "pcap", "", "mobile mode: write each path's captured test packets to `DIR`/IFACE.pcap")
	fl.StringVar(&opts.Mode, "mode", "stable", "`MODE`: stable (the pattern matrix) or mobile (interactive over the handover transports until the primary path is lost)")
	fl.DurationVar(&opts.Mobile.Grace, "grace", patterns.DefaultMobileGrace, "mobile mode: how long to go on after the primary path is lost")
	fl.DurationVar(&opts.Mobile.Thresholds.RTT, "rtt-threshold", mobile.DefaultThresholds.RTT, "mobile mode: the primary's srtt above which the backup use is caused by RTT (000 §II-B)")
	fl.DurationVar(&opts.Mobile.Thresholds.RTO, "rto-threshold", mobile.DefaultThresholds.RTO, "mobile mode: the primary's RTO above which the backup use is caused by RTO (000 §II-B)")
	cmdutil.OutputFlag(cmd, &opts.Output, "write the JSON document to `file` (- for stdout)")
	fl.StringVar(&opts.JUnit, "junit", "", "also write the tests as JUnit XML to `FILE` (one testcase per pattern, transport, family and path; rewritten atomically after each test)")
	fl.BoolVar(&opts.NoUpload, "no-upload", false, "keep the result in the spool; `mptester upload` sends it later")
	fl.Int64Var(&opts.Params.Size, "size", patterns.DefaultBulkSize, "bulk download size in `bytes`")
	fl.DurationVar(&opts.Params.Duration, "duration", patterns.DefaultIperf, "iperf (each direction) and interactive duration")
	fl.IntVar(&opts.Params.ChunkSize, "chunk-size", patterns.DefaultChunk, "interactive chunk size in `bytes`")
	fl.DurationVar(&opts.Params.Interval, "interval", patterns.DefaultInterval, "interactive sending interval")
	fl.IntVar(&opts.Params.PingCount, "ping-count", patterns.DefaultPingCount, "requests of the ping pattern")
	fl.StringVar(&opts.Params.Direction, "iperf-direction", patterns.DirectionBoth, "iperf direction: both, upload or download")
	return cmd
}

// applyConfig fills what the command line left unset from the config's run
// section, whose values were checked when it was loaded.
func applyConfig(opts *Options, cfg *config.Config, changed func(string) bool) {
	if cfg == nil {
		return
	}
	c := cfg.Run
	set := func(key, flag string, apply func()) {
		if cfg.Has("run."+key) && !changed(flag) {
			apply()
		}
	}
	set("servers", "server", func() { opts.Servers = c.Servers })
	set("patterns", "patterns", func() { opts.Patterns = c.Patterns })
	set("transports", "transports", func() { opts.Transports = c.Transports })
	set("paths", "paths", func() { opts.Paths = c.Paths })
	set("no_private", "no-private", func() { opts.NoPrivate = c.NoPrivate })
	set("public_prefixes", "public-prefix", func() { opts.PublicPrefixes = c.PublicPrefixes })
	// --insecure and a configured pin exclude each other; the flag wins.
	if !changed("insecure") || !opts.Insecure {
		set("pin", "pin", func() { opts.Pin = c.Pin })
	}
}

// check validates every value, each bad one its own message naming its
// flag, and the output, before the run touches the network or a file.
func check(opts *Options) error {
	var ch config.Checker
	if len(opts.Servers) == 0 {
		ch.Check("--server", fmt.Errorf("is required"))
	}
	ch.Check("--server", config.Servers(opts.Servers))
	if opts.Pin != "" {
		ch.Check("--pin", certs.CheckPin(opts.Pin))
		if opts.Insecure {
			ch.Check("--pin", fmt.Errorf("use --pin or --insecure, not both"))
		}
	}
	if opts.Smoke && len(opts.Servers) > 1 {
		ch.Check("--smoke", fmt.Errorf("checks one server (got %d)", len(opts.Servers)))
	}
	ch.Check("--patterns", config.Names(opts.Patterns, patterns.CheckName))
	ch.Check("--transports", config.Names(opts.Transports, transport.CheckName))
	ch.Check("--paths", config.Interfaces(opts.Paths))
	ch.Check("--public-prefix", config.Prefixes(opts.PublicPrefixes))
	_, err := probe.ParseFamily(opts.Family)
	ch.Check("--family", err)
	p := opts.Params
	ch.Check("--size", config.Positive(p.Size))
	ch.Check("--duration", config.Positive(p.Duration))
	ch.Check("--interval", config.Positive(p.Interval))
	if p.ChunkSize < 4 {
		ch.Check("--chunk-size", fmt.Errorf("must be at least 4 (got %d)", p.ChunkSize))
	}
	// The schedule schema's bounds (collect/api: ping_count).
	ch.Check("--ping-count", config.IntIn(p.PingCount, 2, 10000))
	switch p.Direction {
	case patterns.DirectionBoth, patterns.DirectionUpload, patterns.DirectionDownload:
	default:
		ch.Check("--iperf-direction", fmt.Errorf("%q (want both, upload or download)", p.Direction))
	}
	ch.Check("--pace", config.NonNegative(opts.Pace))
	ch.Check("--timeout", config.NonNegative(opts.Timeout))
	ch.Check("--connect-timeout", config.Positive(opts.ConnectTimeout))
	ch.Check("--stall-timeout", config.Positive(opts.StallTimeout))
	ch.Check("--output", cmdutil.CheckOutput(opts.Output, opts.ConfigFile))
	if opts.JUnit == "-" {
		ch.Check("--junit", fmt.Errorf("needs a file (the JSON document may be on stdout)"))
	} else {
		ch.Check("--junit", cmdutil.CheckOutput(opts.JUnit, opts.ConfigFile, opts.Output))
	}
	switch opts.Mode {
	case "stable":
	case "mobile":
		if opts.Smoke {
			ch.Check("--smoke", fmt.Errorf("checks the stable mode's matrix, not --mode mobile"))
		}
		if opts.JUnit != "" {
			ch.Check("--junit", fmt.Errorf("reports the stable mode's matrix, not --mode mobile"))
		}
		if len(opts.Patterns) > 0 && !slices.Equal(opts.Patterns, []string{"interactive"}) {
			ch.Check("--patterns", fmt.Errorf("--mode mobile runs the interactive pattern only"))
		}
		for _, n := range opts.Transports {
			if d, err := transport.Get(n); err == nil && !d.Handover {
				ch.Check("--transports", fmt.Errorf("%s is not a handover transport (keeps no connection across a path loss); --mode mobile takes %s", n, strings.Join(patterns.HandoverTransports(), ", ")))
			}
		}
		ch.Check("--grace", config.Positive(opts.Mobile.Grace))
		if d := opts.Mobile.PcapDir; d != "" {
			if !opts.Mobile.Capture {
				ch.Check("--pcap", fmt.Errorf("needs --capture"))
			}
			if st, err := os.Stat(d); err != nil || !st.IsDir() {
				ch.Check("--pcap", fmt.Errorf("%s is not a directory", d))
			}
		}
		ch.Check("--rtt-threshold", config.Positive(opts.Mobile.Thresholds.RTT))
		ch.Check("--rto-threshold", config.Positive(opts.Mobile.Thresholds.RTO))
	default:
		ch.Check("--mode", fmt.Errorf("%q (want stable or mobile)", opts.Mode))
	}
	if opts.Mode != "mobile" && opts.Mobile.PcapDir != "" {
		ch.Check("--pcap", fmt.Errorf("captures in --mode mobile only"))
	}
	ch.Check("--qlog", config.OutputDir(opts.QlogDir))
	_, err = nw.ParseService(opts.MPTCPService)
	ch.Check("--mptcp-service", err)
	if err == nil && opts.MPTCPServiceSet && !mptcpServiceApplies {
		ch.Check("--mptcp-service", fmt.Errorf("applies on macOS only (Linux's kernel MPTCP has no service modes: its path manager and scheduler decide, see `ip mptcp`)"))
	}
	if _, err := mpquic.ParseCongestionControl(opts.MPQUICCC); err != nil && opts.MPQUICCC != "" {
		ch.Check("--mpquic-cc", err)
	}
	return cmdutil.Usage(ch.Err())
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

func runRun(ctx context.Context, opts *Options) error {
	if err := check(opts); err != nil {
		return err
	}
	mobileMode := opts.Mode == "mobile"
	switch {
	case mobileMode:
		opts.Patterns, opts.Stable = []string{"interactive"}, false
		if len(opts.Transports) == 0 {
			opts.Transports = patterns.HandoverTransports()
		}
		if !opts.DurationSet {
			opts.Params.Duration = patterns.DefaultMobileDuration
		}
		opts.Mobile.Duration = opts.Params.Duration
	default:
		if len(opts.Patterns) == 0 {
			opts.Patterns = patterns.Names()
		}
		if len(opts.Transports) == 0 {
			opts.Transports = transport.Names()
		}
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
	for _, b := range opts.Backup {
		if !slices.Contains(names(paths), b) {
			return cmdutil.FlagErrorf("--backup: %q is not one of the paths (%s)", b, strings.Join(names(paths), ", "))
		}
	}
	var eps []doctor.MPTCPEndpoint
	if opts.Endpoints != nil {
		eps = opts.Endpoints(ctx)
	}
	backup, problems := patterns.HostRoles(opts.Transports, opts.Backup, paths, eps)
	if len(problems) > 0 {
		return cmdutil.FlagErrorf("--backup: %s", strings.Join(problems, "; "))
	}
	opts.Backup = backup
	if opts.NoPrivate {
		g, err := targetGuard(opts.PublicPrefixes, pathNAT64(ctx, paths, opts.Logger))
		if err != nil {
			return err
		}
		ctx = probe.WithTargetGuard(ctx, g)
	}
	local := probe.LocalAddrs()
	if wrong := patterns.WrongPaths(ctx, opts.Servers, paths, opts.Transports, local, probe.RouteDev); len(wrong) > 0 {
		return cmdutil.FlagErrorf("--server: %s", strings.Join(wrong, "; "))
	}
	if mobileMode && opts.Mobile.Capture {
		// A missing CAP_NET_RAW is found before the output is touched.
		if err := capture.Check(ctx, names(paths)); err != nil {
			if errors.Is(err, capture.ErrPermission) {
				return fmt.Errorf("%w: %w (or --capture=false: handover times from the 100 ms samples)", cmdutil.ErrPermission, err)
			}
			return err
		}
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
	cfg := Config{Servers: opts.Servers, Patterns: opts.Patterns, Transports: opts.Transports, Paths: names(paths), Backup: opts.Backup, DNS: opts.DNS,
		Seed: opts.Seed, Pace: opts.Pace, Timeout: opts.Timeout, ConnectTimeout: opts.ConnectTimeout, Stable: opts.Stable, Smoke: opts.Smoke,
		Ports: opts.Ports, Pinned: opts.Pin != "", Insecure: opts.Insecure, Params: opts.Params, Mode: opts.Mode}
	if mobileMode {
		cfg.Mobile = &opts.Mobile
	}
	if s := mptcpService(opts); s != 0 {
		cfg.MPTCPService = s.String()
	}
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
	// Every input is valid: the output is created now and each test is
	// written to it as it ends.
	if opts.QlogDir != "" {
		if err := os.MkdirAll(opts.QlogDir, 0o755); err != nil {
			return fmt.Errorf("--qlog: %w", err)
		}
	}
	w, closeOut, err := cmdutil.CreateOutput("--output", opts.Output, opts.IO.Out)
	if err != nil {
		return err
	}
	defer closeOut()
	// The spooled copy is the same bytes as the output, for the upload.
	ds, err := newDocStream(io.MultiWriter(w, spooled.Writer()), hdr)
	if err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	var doc report.Document
	ci := newCIReport(opts.JUnit, hdr, opts)
	altSuffix := "" // names the tests of an alternative port
	ro := patterns.RunOptions{Servers: opts.Servers, Ports: opts.Ports, AltPorts: opts.AltPorts,
		Patterns: opts.Patterns, Transports: opts.Transports, Paths: paths, Backup: opts.Backup, Families: fams, Params: opts.Params,
		Seed: opts.Seed, Pace: opts.Pace, Timeout: opts.Timeout, ConnectTimeout: opts.ConnectTimeout, StallTimeout: opts.StallTimeout, Stable: opts.Stable, Discover: opts.Discover, PollEvery: opts.PollEvery,
		HTTP1: opts.HTTP1, QlogDir: opts.QlogDir, Logger: opts.Logger, MPTCPService: mptcpService(opts), MPQUICCongestion: mpquic.CongestionControl(opts.MPQUICCC),
		QUICECN: opts.QUICECN,
		TLS: func(host string) (*tls.Config, error) {
			name := opts.ServerName
			if name == "" {
				name = host
			}
			return certs.ClientTLS(name, opts.Pin, opts.Insecure)
		},
		Check: patterns.CheckRecord(ctx, paths, local, probe.RouteDev),
		Emit: func(rec any) error {
			b, err := json.Marshal(rec)
			if err != nil {
				return fmt.Errorf("encode record: %w", err)
			}
			if err := ds.record(b); err != nil {
				return fmt.Errorf("write output: %w", err)
			}
			if r, ok := rec.(patterns.Record); ok {
				ci.record(r, b, altSuffix, opts.Smoke)
			}
			return nil
		}}
	if mobileMode {
		return finishMobile(ctx, opts, ro, ds, closeOut, spooled)
	}
	sum, runErr := patterns.Run(ctx, ro)
	var smokeFails []string
	for _, name := range opts.Transports {
		d, _ := transport.Get(name)
		port := opts.AltPorts[d.Listener()]
		if !opts.Smoke || runErr != nil || port == 0 {
			continue
		}
		// 000 §III: QUIC on a non-standard port reveals middleboxes that
		// treat UDP 443 specially.
		alt := ro
		alt.Patterns, alt.Transports = []string{"ping"}, []string{name}
		alt.Ports = maps.Clone(opts.Ports)
		alt.Ports[d.Listener()] = port
		alt.Servers = []string{patterns.ServerHost(opts.Servers[0])}
		altSuffix = fmt.Sprintf(" port %d", port)
		s2, err := patterns.Run(ctx, alt)
		altSuffix = ""
		if err != nil {
			smokeFails = append(smokeFails, fmt.Sprintf("%s port %d: %v", name, port, err))
			ci.check(fmt.Sprintf("ping/%s port %d", name, port), "error", err)
		}
		for _, r := range s2.Failed {
			smokeFails = append(smokeFails, fmt.Sprintf("ping/%s port %d over %s (IPv%d): %s%s: %s", name, port, r.Config.Path, r.Config.Family, r.Status, causeNote(r.Cause), r.Error))
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
		ci.check("run", "error", runErr)
	case sum.Invalid:
		doc.Status, doc.Reason = report.StatusInvalid, sum.Reason
		exitErr = fmt.Errorf("%w: %s", cmdutil.ErrInvalid, sum.Reason)
	case len(sum.Failed) > 0:
		doc.Status, doc.Reason = report.StatusPartial, fmt.Sprintf("%d of %d tests failed", len(sum.Failed), sum.Tests)
		exitErr = fmt.Errorf("%w: %s", cmdutil.ErrPartial, doc.Reason)
	default:
		doc.Status = report.StatusOK
	}
	if runErr == nil && !sum.Invalid {
		ci.notApplicable(opts, paths, fams, sum.All)
	}
	if opts.Smoke {
		for _, r := range sum.Failed {
			c := r.Config
			smokeFails = append(smokeFails, fmt.Sprintf("%s/%s over %s (IPv%d): %s%s: %s", c.Pattern, c.Transport, c.Path, c.Family, r.Status, causeNote(r.Cause), r.Error))
		}
		for _, r := range sum.All {
			// A transport that was not really used (MPTCP falling back to
			// TCP) fails the check.
			if d, ok := r.Summary.(transport.Degraded); ok && r.Status == patterns.StatusSuccess {
				if why := d.Degraded(); why != "" {
					c := r.Config
					smokeFails = append(smokeFails, fmt.Sprintf("%s/%s over %s (IPv%d): %s%s", c.Pattern, c.Transport, c.Path, c.Family, why, causeNote(r.Cause)))
				}
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
			na := ""
			if _, _, n := ci.counts(); n > 0 {
				na = fmt.Sprintf(" (%d not applicable)", n)
			}
			fmt.Fprintf(opts.IO.ErrOut, "smoke: %d checks passed against %s%s\n", sum.Tests, sum.Selected, na)
		}
	}
	if err := ds.end(doc.FinishedAt, doc.Status, doc.Reason); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	if err := closeOut(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	// A JUnit file that could not be written fails the run, after the
	// document and the spool are complete.
	jerr := ci.end(sum.Selected, doc.Status, doc.Reason)
	if opts.GitHub {
		if err := ci.github(opts.IO.ErrOut, opts.StepSummary); err != nil && jerr == nil {
			jerr = err
		}
	}
	if err := spooled.Finish(ctx, exitErr); err != nil || jerr == nil {
		return err
	}
	return jerr
}

// causeNote renders a record's cause for a smoke line: the network's
// part, as the diagnosis after the test measured it.
func causeNote(cause string) string {
	if cause == "" {
		return ""
	}
	return " (cause " + cause + ")"
}

// finishMobile runs mobile mode and ends the document: ok when every
// transport's streams ran to the end, partial otherwise.
func finishMobile(ctx context.Context, opts *Options, ro patterns.RunOptions, ds *docStream, closeOut func() error, spooled *cmdutil.Spooled) error {
	rec, runErr := patterns.RunMobile(ctx, ro, opts.Mobile)
	finished := time.Now().UTC()
	status, reason := report.StatusOK, ""
	var exitErr error
	var failed []string
	for _, t := range rec.Transports {
		if t.Status != patterns.StatusSuccess {
			failed = append(failed, fmt.Sprintf("%s: %s", t.Transport, t.Status))
		}
	}
	switch {
	case runErr != nil && errors.Is(runErr, context.Canceled):
		status, reason = report.StatusPartial, "cancelled"
		exitErr = fmt.Errorf("%w: %w", cmdutil.ErrCancelled, runErr)
	case runErr != nil:
		status, reason = report.StatusError, runErr.Error()
		exitErr = runErr
	case len(failed) > 0:
		status, reason = report.StatusPartial, "streams cut: "+strings.Join(failed, "; ")
		exitErr = fmt.Errorf("%w: %s", cmdutil.ErrPartial, reason)
	}
	if err := ds.end(finished, status, reason); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	if err := closeOut(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return spooled.Finish(ctx, exitErr)
}

func names(ps []probe.Path) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}
