// Package survey implements `mptester survey`: per-path resolution of a
// Tranco list and the WW/WL/LW/LL RTT and reachability matrix (study 004
// §III), streamed as JSON Lines.
package survey

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/internal/bogon"
	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/internal/config"
	"github.com/mptester/mptester/internal/memtrim"
	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/report"
	"github.com/mptester/mptester/survey"
	"github.com/mptester/mptester/survey/list"
)

// Options for `mptester survey`.
type Options struct {
	IO       *cmdutil.IOStreams
	Logger   func() *slog.Logger
	Config   func() *config.Config
	Discover func(ctx context.Context, dnsFlags []string) ([]probe.Path, error)
	ProbeID  func() string
	// changed reports whether a flag was set on the command line (flags
	// override the config file).
	changed func(string) bool
	// listFrom names where List came from in messages (flag or config key).
	listFrom string

	Top               int
	List              string
	ListID            string
	CacheDir          string
	TrancoURL         string
	Paths             []string
	DNS               []string
	Family            string
	Method            string
	Port              int
	Count             int
	Timeout           time.Duration
	Spacing           time.Duration
	Rate              float64
	AllowCrossPrivate bool
	NoPrivate         bool
	NoNAT64           bool
	NAT64Prefixes     []string // PATH=PREFIX, known without RFC 7050
	PublicPrefixes    []string
	MaxBytes          []string
	DNSTimeout        time.Duration
	DNSRetries        int
	ResolverCap       int
	Out               string
	Resume            string
	NoUpload          bool
	MemProfile        string // hidden: heap profile at the live heap's peak
	// Spool opens the upload spool (nil: none).
	Spool func(noUpload bool) (*cmdutil.Spooled, error)
}

// NewCmdSurvey builds the command; runF replaces surveyRun in tests.
func NewCmdSurvey(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO,
		Logger:   func() *slog.Logger { return f.Logger },
		Config:   func() *config.Config { return f.Config },
		Discover: f.DiscoverPaths, ProbeID: f.ProbeID, Spool: f.Spool}
	cmd := &cobra.Command{
		Use:   "survey",
		Short: "Resolve a Tranco list on every path and probe every address from every path",
		Long: `Resolve the top domains of a Tranco list with each path's own DNS servers,
then probe every resolved address from every path: for two paths W and L the
cells WW, WL, LW and LL of study 004 §III. Output is JSON Lines: a header,
"resolution" and "probe" records, a "summary" record and a trailer.

The list: --list FILE, or a Tranco list by id (--list-id ID), or by
default today's Tranco list, downloaded once a day into the cache
directory and reused; the header records its id, date and sha256, and
--list-id ID reruns the same list. Offline, with no list cached for
today, the survey stops before writing anything: use --list FILE.

Methods: tcp-syn (raw SYN like hping3 -S; default with root or CAP_NET_RAW), tcp-connect
(unprivileged; each attempt is capped at 900 ms, below the first SYN
retransmission, so a retransmitted SYN never inflates an RTT) and icmp.
SYN-ACK and RST both count as answers and are told apart.

NAT64: at start each path's resolvers are asked for ipv4only.arpa's AAAA
(RFC 7050, one query per path; --no-nat64 skips it; --nat64-prefix
PATH=PREFIX names a path's prefix where its DNS64 does not answer
ipv4only.arpa, e.g. from the network's router advertisements, RFC 8781). On a path with a
NAT64 prefix and no IPv4 address, IPv4 targets are probed through the
translator at the synthesized address (RFC 6052) and recorded with route
"via-nat64" and the prefix, their RTTs kept apart in the cells
(rtt_via_nat64_ms); AAAA answers inside a path's prefix are a DNS64's
synthesis and count as the IPv4 address they embed, in the overlap and the
cells. The prefixes are in the header (nat64_prefixes) and the summary.

Overload: the prober watches its own sockets' drops, the host's input
drops, how late it reads replies and sends probes, and lowers --rate while
the host cannot keep up. A target left silent while replies may have been
lost is probed again; if it cannot be measured cleanly its record says
host_overloaded and it is not counted unresponsive. The summary's
"degraded" object and the trailer's reason say what happened; a run with
such targets ends "partial".

Politeness: --rate caps probes per second over all paths, --spacing spaces
the probes of one target. Broadcast and multicast addresses are never
probed; a private/reserved address is probed only from the path whose
resolver returned it (--allow-cross-private overrides; --public-prefix
marks a reserved range as public, e.g. in the lab).

Interrupted runs (SIGINT/SIGTERM) write what they measured, a summary with
status "partial" and exit 130. --resume OLD --output NEW continues: NEW gets
OLD's resolution and probe records, then only what is missing is measured.`,
		Example: `  mptester survey --top 10000 -o survey.jsonl
  mptester survey --top 10000 --list top-1m.csv.zip --paths wlan0,wwan0 -o survey.jsonl
  mptester survey --list-id K4Z5W --top 1000 --method tcp-connect --rate 50
  mptester survey --list top-1m.csv --resume survey.jsonl -o survey2.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.changed = cmd.Flags().Changed
			return cmdutil.Dispatch(cmd.Context(), opts, runF, surveyRun)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&opts.Top, "top", 10000, "survey the top `N` domains of the list")
	fl.StringVar(&opts.List, "list", "", "Tranco list `file`: CSV rank,domain, or a .zip holding it")
	fl.StringVar(&opts.ListID, "list-id", "", "download Tranco list `ID` into the cache directory (default: \"latest\", today's list, unless --list)")
	fl.StringVar(&opts.CacheDir, "cache-dir", "", "where downloaded lists are kept (default: $CACHE_DIRECTORY/tranco under systemd, else the user cache dir)")
	fl.StringVar(&opts.TrancoURL, "tranco-url", list.DefaultTrancoURL, "base `URL` of the Tranco list service (a mirror)")
	fl.StringSliceVar(&opts.Paths, "paths", nil, "`IFACES` to use (default: every up, non-loopback path with a default route)")
	fl.StringArrayVar(&opts.DNS, "dns", nil, "use `IFACE=ADDR[,ADDR]` as the resolvers of IFACE (repeatable)")
	fl.StringVar(&opts.Family, "family", "both", "address family to resolve and probe: 4, 6 or both")
	fl.StringVar(&opts.Method, "method", "", "probe `method`: tcp-syn, tcp-connect or icmp (default tcp-syn with root or CAP_NET_RAW, else tcp-connect)")
	fl.IntVar(&opts.Port, "port", 443, "TCP port to probe")
	fl.IntVar(&opts.Count, "count", 10, "probes per target")
	fl.DurationVar(&opts.Timeout, "timeout", time.Second, "per-probe timeout")
	fl.DurationVar(&opts.Spacing, "spacing", 100*time.Millisecond, "minimum time between two probes of one target")
	fl.Float64Var(&opts.Rate, "rate", 100, "probes per second over all paths")
	fl.BoolVar(&opts.AllowCrossPrivate, "allow-cross-private", false, "probe private/reserved addresses from paths other than the one that resolved them")
	fl.BoolVar(&opts.NoNAT64, "no-nat64", false, "skip RFC 7050 NAT64 prefix discovery: IPv4 targets on IPv6-only paths stay no-source-address, synthesized AAAA count as IPv6")
	fl.StringArrayVar(&opts.NAT64Prefixes, "nat64-prefix", nil, "path `PATH=PREFIX`'s NAT64 prefix (RFC 6052: /32, /40, /48, /56, /64 or /96), for a DNS64 RFC 7050 cannot discover (repeatable; the path is not asked)")
	fl.BoolVar(&opts.NoPrivate, "no-private", false, "probe no private/reserved address and none on this host's own subnets, from any path (the fleet agent's default)")
	_ = fl.MarkHidden("no-private")
	fl.StringArrayVar(&opts.PublicPrefixes, "public-prefix", nil, "treat `PREFIX` as public despite the bogon table (repeatable)")
	fl.StringArrayVar(&opts.MaxBytes, "max-bytes", nil, "send at most `PATH=SIZE` (e.g. wwan0=50MB) on a metered path (repeatable)")
	fl.DurationVar(&opts.DNSTimeout, "dns-timeout", 2*time.Second, "per-attempt DNS timeout")
	fl.IntVar(&opts.DNSRetries, "dns-retries", 2, "DNS retries after a timeout (rotating servers)")
	fl.IntVar(&opts.ResolverCap, "resolver-concurrency", survey.DefaultResolverCap, "at most `N` DNS queries in flight per resolver (the window grows to it while the resolver keeps up)")
	cmdutil.OutputFlag(cmd, &opts.Out, "write JSON Lines to `file` (- for stdout)")
	fl.StringVar(&opts.Resume, "resume", "", "continue the interrupted run in `file` (write to a different --output)")
	fl.BoolVar(&opts.NoUpload, "no-upload", false, "keep the result in the spool; `mptester upload` sends it later")
	fl.StringVar(&opts.MemProfile, "memprofile", "", "write a heap profile taken at the live heap's peak to `file` and log the memory peaks")
	_ = fl.MarkHidden("memprofile")
	return cmd
}

// applyConfig fills options the command line left unset from the config,
// whose values were checked when it was loaded. Flags override the file,
// including where they exclude each other: --list-id replaces survey.list.
func applyConfig(opts *Options) {
	cfg := opts.Config()
	if cfg == nil {
		return
	}
	c := cfg.Survey
	changed := func(flag string) bool { return opts.changed != nil && opts.changed(flag) }
	set := func(key, flag string, apply func()) {
		if cfg.Has("survey."+key) && !changed(flag) {
			apply()
		}
	}
	set("top", "top", func() { opts.Top = c.Top })
	if !changed("list-id") {
		set("list", "list", func() { opts.List, opts.listFrom = c.List, cfg.Where("survey.list") })
	}
	set("paths", "paths", func() { opts.Paths = c.Paths })
	set("family", "family", func() { opts.Family = c.Family })
	set("method", "method", func() { opts.Method = c.Method })
	set("port", "port", func() { opts.Port = c.Port })
	set("count", "count", func() { opts.Count = c.Count })
	set("rate", "rate", func() { opts.Rate = c.Rate })
	set("timeout", "timeout", func() { opts.Timeout = c.Timeout.D() })
	set("spacing", "spacing", func() { opts.Spacing = c.Spacing.D() })
	set("cache_dir", "cache-dir", func() { opts.CacheDir = c.CacheDir })
	set("tranco_url", "tranco-url", func() { opts.TrancoURL = c.TrancoURL })
	set("public_prefixes", "public-prefix", func() { opts.PublicPrefixes = c.PublicPrefixes })
	set("allow_cross_private", "allow-cross-private", func() { opts.AllowCrossPrivate = c.AllowCrossPrivate })
	set("max_bytes", "max-bytes", func() {
		var mb []string
		for path, size := range c.MaxBytes {
			mb = append(mb, path+"="+size)
		}
		slices.Sort(mb)
		opts.MaxBytes = mb
	})
}

// memoryLimit is the soft limit of the Go runtime's memory (heap and
// goroutine stacks) for a survey of n domains unless GOMEMLIMIT says
// otherwise: the GC works harder instead of growing the heap, so a survey
// stays within a Raspberry Pi's spare memory (64 MB of RSS; the
// binary's own pages take ~17-21 MB of it at the peak, trimmed). What a
// run holds grows slowly with the list: ~3 bytes a domain (the
// DomainList's length byte, a status byte per path; names and the domains
// of each address spill to temporary files) and ~10 bytes a resolved
// address (its lookup slot; past 64K addresses their records are in a
// temporary file too: a real top-1M list has ~1.5M), so 8 bytes a domain
// on top of a fixed 28 MiB: 28.8 MiB at 100K, 35.6 MiB at 1M (the 1M lab
// survey's live heap peaks at ~14 MB, ~21 MB with the records in
// memory). The base was 36 MiB while the resolution
// kept a goroutine per lookup (11.5 MB of stacks, now ~1.4 MB): the heap
// grew into what the stacks gave back (1M: RSS 69.6 MB). It was 16 bytes
// a domain before (51 MiB at 1M, RSS 84.8 MB), and 48 MiB + 512 B a
// domain before that.
func memoryLimit(n int) int64 { return 28<<20 + int64(n)*8 }

// trimBinary drops the binary's code and read-only data from the resident
// set (package memtrim).
func trimBinary(log *slog.Logger) {
	if n, err := memtrim.Trim(); err != nil {
		log.Debug("cannot trim the binary's resident pages", "err", err)
	} else if n > 0 {
		log.Debug("binary's pages trimmed", "mapped_mb", n>>20)
	}
}

func surveyRun(ctx context.Context, opts *Options) error {
	log := opts.Logger()
	if log == nil {
		log = slog.New(slog.NewTextHandler(opts.IO.ErrOut, nil))
	}
	applyConfig(opts)
	cfg, err := buildConfig(opts)
	if err != nil {
		return err
	}
	cfg.Logger = log
	if opts.MemProfile != "" {
		mw := startMemWatch(opts.MemProfile, log)
		defer mw.Stop()
	}
	// Startup left most of the binary resident, little of which a survey
	// runs (64 MB on a Pi); again once the list is read.
	trimBinary(log)

	// The list's duplicate check is the largest thing a 1M survey holds
	// while the list is read: the base limit holds from the start.
	limited := os.Getenv("GOMEMLIMIT") == ""
	if limited {
		old := debug.SetMemoryLimit(memoryLimit(0))
		defer debug.SetMemoryLimit(old)
	}
	list, info, err := loadDomains(ctx, opts)
	if err != nil {
		return err
	}
	defer list.Close()
	if info.Malformed > 0 {
		log.Warn("malformed list lines skipped", "count", info.Malformed, "first", strings.Join(info.FirstMalformed, "; "))
	}
	if info.Duplicates > 0 {
		log.Info("duplicate domains dropped", "count", info.Duplicates)
	}
	if list.Len() == 0 {
		return cmdutil.FlagErrorf("the list %s holds no usable domain", info.Source)
	}
	cfg.List = list
	if limited {
		debug.SetMemoryLimit(memoryLimit(list.Len()))
	}

	all, err := opts.Discover(ctx, opts.DNS)
	if err != nil {
		return err
	}
	cfg.Paths, err = cmdutil.SelectPaths(all, opts.Paths)
	if err != nil {
		return err
	}
	for _, p := range cfg.Paths {
		if len(p.DNS) == 0 {
			log.Warn("path has no DNS server: it resolves nothing but still probes", "path", p.Name)
		}
	}
	for name := range cfg.Policy.NAT64 {
		if !slices.ContainsFunc(cfg.Paths, func(p probe.Path) bool { return p.Name == name }) {
			return cmdutil.FlagErrorf("--nat64-prefix %s: no such path among those surveyed (%s)", name, strings.Join(names(cfg.Paths), ", "))
		}
	}
	dnsFlags := opts.DNS
	cfg.Discover = func(ctx context.Context) ([]probe.Path, error) { return opts.Discover(ctx, dnsFlags) }

	hdrCfg := map[string]any{"list": info, "resume": opts.Resume, "top": opts.Top, "family": opts.Family,
		"method": cfg.Method, "port": cfg.Port, "count": cfg.Count, "timeout": cfg.Timeout.String(),
		"dns_timeout": cfg.DNSTimeout.String(), "dns_retries": cfg.DNSRetries,
		"spacing": cfg.Spacing.String(), "rate": cfg.Rate, "allow_cross_private": cfg.Policy.AllowCrossPrivate,
		"public_prefixes": cfg.Policy.Public, "max_bytes": cfg.MaxBytes}
	if opts.Resume != "" {
		old, err := readResumeHeader(opts.Resume)
		if err != nil {
			return cmdutil.FlagErrorf("--resume %s: %v", opts.Resume, err)
		}
		now := resumeKey{Top: opts.Top, Family: opts.Family, Method: cfg.Method, Port: cfg.Port, Count: cfg.Count,
			Timeout: cfg.Timeout.String(), DNSTimeout: cfg.DNSTimeout.String(), paths: names(cfg.Paths)}
		now.List.SHA256 = info.SHA256
		if err := checkResume(old, now); err != nil {
			return cmdutil.FlagErrorf("--resume %s: %v", opts.Resume, err)
		}
		f, err := os.Open(opts.Resume)
		if err != nil {
			return cmdutil.FlagErrorf("--resume: %v", err)
		}
		defer f.Close()
		cfg.ResumeFrom = f
	}

	spooled, err := cmdutil.OpenSpool(opts.Spool, opts.NoUpload)
	if err != nil {
		return err
	}
	// A path held by a captive portal would record the portal's address
	// for every domain: its part of the survey stops here, the header
	// says why (survey.DetectPortals measures it).
	if stopped := survey.DetectPortals(ctx, cfg.Paths, cfg.DNSTimeout, log); len(stopped) > 0 {
		hdrCfg["stopped_paths"] = stopped
		cfg.Paths = slices.DeleteFunc(cfg.Paths, func(p probe.Path) bool { return stopped[p.Name] != "" })
		if len(cfg.Paths) == 0 {
			return fmt.Errorf("every path is held by a captive portal, nothing to survey: %v", stopped)
		}
	}
	if given := cfg.Policy.NAT64; !opts.NoNAT64 || len(given) > 0 {
		// Discovery asks only the paths without a given prefix.
		cfg.Policy.NAT64 = map[string]netip.Prefix{}
		if !opts.NoNAT64 {
			ask := slices.DeleteFunc(slices.Clone(cfg.Paths), func(p probe.Path) bool { _, ok := given[p.Name]; return ok })
			cfg.Policy.NAT64 = survey.DiscoverNAT64(ctx, ask, cfg.DNSTimeout, log)
		}
		for name, pfx := range given {
			cfg.Policy.NAT64[name] = pfx
		}
		hdrCfg["nat64_prefixes"] = cfg.Policy.NAT64
		if len(given) > 0 {
			hdrCfg["nat64_prefixes_given"] = given
		}
	}
	hdr, err := report.NewHeader("survey", opts.ProbeID(), cfg.Paths, hdrCfg)
	if err != nil {
		return err
	}

	// Every input is valid: only now is the output created.
	w, closeOut, err := cmdutil.CreateOutput("--output", opts.Out, opts.IO.Out)
	if err != nil {
		return err
	}
	defer closeOut()
	if opts.IO.IsStderrTTY() {
		cfg.Progress = opts.IO.ErrOut
	}
	if err := spooled.Start(hdr.RunID, ".jsonl"); err != nil {
		return err
	}
	st, err := report.NewStream(io.MultiWriter(w, spooled.Writer()), hdr)
	if err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	trimBinary(log)
	sum, runErr := survey.Run(ctx, cfg, st)
	reason := ""
	switch {
	case runErr != nil:
		reason = runErr.Error()
	case sum.Degraded != nil: // the host fell behind, re-probing made up for it
		reason = "degraded, recovered: " + sum.Degraded.Reason
	}
	status := report.Status(sum.Status)
	if status == "" {
		status = report.StatusError
	}
	if err := st.Close(status, reason); err != nil {
		// Records that did not reach the output are lost: that outranks
		// whatever else the run reports (a closed or full stdout included).
		if runErr != nil {
			return fmt.Errorf("write output: %w (and the survey: %v)", err, runErr)
		}
		return fmt.Errorf("write output: %w", err)
	}
	return spooled.Finish(ctx, exitError(runErr))
}

// exitError maps the survey's outcome to the command's exit status.
func exitError(runErr error) error {
	switch {
	case runErr == nil:
		return nil
	case errors.Is(runErr, survey.ErrInterrupted):
		return fmt.Errorf("%w: %w (summary written with status partial)", cmdutil.ErrCancelled, runErr)
	case errors.Is(runErr, survey.ErrPathChanged):
		return fmt.Errorf("%w: %w", cmdutil.ErrInvalid, runErr)
	case errors.Is(runErr, survey.ErrIncomplete), errors.Is(runErr, survey.ErrDegraded):
		return fmt.Errorf("%w: %w", cmdutil.ErrPartial, runErr)
	}
	return runErr
}

// buildConfig checks every value, each bad one its own message naming its
// flag, and the output, before anything is read or written.
func buildConfig(opts *Options) (survey.Config, error) {
	var ch config.Checker
	fam, err := probe.ParseFamily(opts.Family)
	ch.Check("--family", err)
	method := opts.Method
	if method == "" {
		// Raw sockets, not root: a service holding only CAP_NET_RAW
		// measures as root does.
		method = "tcp-connect"
		if runtime.GOOS == "linux" && probe.CheckRaw(probe.Family4, "tcp") == nil {
			method = "tcp-syn"
		}
	}
	ch.Check("--method", survey.CheckMethod(method))
	ch.Check("--top", config.Positive(opts.Top))
	ch.Check("--count", config.IntIn(opts.Count, 1, 1000))
	ch.Check("--port", config.IntIn(opts.Port, 1, 65535))
	ch.Check("--timeout", config.Positive(opts.Timeout))
	ch.Check("--rate", config.Rate(opts.Rate))
	ch.Check("--spacing", config.NonNegative(opts.Spacing))
	ch.Check("--dns-timeout", config.Positive(opts.DNSTimeout))
	ch.Check("--dns-retries", config.IntIn(opts.DNSRetries, 0, 10))
	ch.Check("--resolver-concurrency", config.IntIn(opts.ResolverCap, 1, 10000))
	ch.Check("--paths", config.Interfaces(opts.Paths))
	ch.Check("--tranco-url", config.BaseURL(opts.TrancoURL))
	if opts.List != "" && opts.ListID != "" {
		ch.Check("--list-id", fmt.Errorf("use --list or --list-id, not both"))
	}
	pol := survey.Policy{AllowCrossPrivate: opts.AllowCrossPrivate && !opts.NoPrivate, NoPrivate: opts.NoPrivate}
	if opts.NoPrivate {
		local, err := bogon.LocalPrefixes()
		ch.Check("--no-private", err)
		pol.Local = local
	}
	for _, s := range opts.PublicPrefixes {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			ch.Check("--public-prefix", fmt.Errorf("invalid prefix %q", s))
			continue
		}
		pol.Public = append(pol.Public, p.Masked())
	}
	for _, s := range opts.NAT64Prefixes {
		name, pfx, err := parseNAT64Prefix(s)
		if err != nil {
			ch.Check("--nat64-prefix", err)
			continue
		}
		if pol.NAT64 == nil {
			pol.NAT64 = map[string]netip.Prefix{}
		}
		if _, dup := pol.NAT64[name]; dup {
			ch.Check("--nat64-prefix", fmt.Errorf("%s given twice", name))
		}
		pol.NAT64[name] = pfx
	}
	maxBytes := map[string]int64{}
	for _, s := range opts.MaxBytes {
		name, size, ok := strings.Cut(s, "=")
		if !ok || name == "" {
			ch.Check("--max-bytes", fmt.Errorf("%q: want PATH=SIZE", s))
			continue
		}
		n, err := config.ByteSize(size)
		ch.Check("--max-bytes "+name, err)
		maxBytes[name] = n
	}
	if opts.Resume != "" && opts.Out != "" && opts.Out != "-" && cmdutil.SameFile(opts.Resume, opts.Out) {
		ch.Check("--resume", fmt.Errorf("%s: write the continued run to a different --output file", opts.Resume))
	} else {
		ch.Check("--output", cmdutil.CheckOutput(opts.Out, opts.List, opts.Resume, opts.Config().File()))
	}
	if err := ch.Err(); err != nil {
		return survey.Config{}, cmdutil.Usage(err)
	}
	if err := checkRaw(method, fam); err != nil {
		return survey.Config{}, err
	}
	return survey.Config{Family: fam, Method: method, Port: opts.Port, Count: opts.Count, Timeout: opts.Timeout,
		Spacing: opts.Spacing, Rate: opts.Rate, Burst: max(1, int(opts.Rate/100)), Policy: pol, MaxBytes: maxBytes,
		DNSTimeout: opts.DNSTimeout, DNSRetries: opts.DNSRetries, ResolverCap: opts.ResolverCap}, nil
}

func loadDomains(ctx context.Context, opts *Options) (*list.DomainList, list.ListInfo, error) {
	if opts.List != "" {
		ds, info, err := list.OpenList(opts.List, opts.Top)
		if err != nil {
			from := opts.listFrom
			if from == "" {
				from = "--list"
			}
			return nil, info, cmdutil.FlagErrorf("%s: %v", from, err)
		}
		return ds, info, nil
	}
	// --list-id, or neither: today's Tranco list.
	id := opts.ListID
	if id == "" {
		id = "latest"
	}
	dir := opts.CacheDir
	if dir == "" {
		dir = list.DefaultCacheDir()
	}
	tl, err := list.TrancoFetcher{BaseURL: opts.TrancoURL, CacheDir: dir}.Fetch(ctx, id)
	if err != nil {
		if errors.Is(err, list.ErrTrancoUnavailable) {
			return nil, list.ListInfo{}, cmdutil.FlagErrorf("%v (offline? survey a list file with --list FILE)", err)
		}
		if opts.ListID != "" {
			err = fmt.Errorf("--list-id: %w", err)
		}
		return nil, list.ListInfo{}, cmdutil.Usage(err)
	}
	ds, info, err := list.OpenList(tl.Path, opts.Top)
	if err != nil {
		return nil, info, cmdutil.FlagErrorf("Tranco list %s (%s): %v", tl.ID, tl.Path, err)
	}
	info.Source, info.ID, info.Date, info.RetrievedAt = "tranco", tl.ID, tl.Date, report.Timestamp(tl.Retrieved)
	how := "downloaded to"
	if tl.Cached {
		how = "cached in"
	}
	date := tl.Date
	if date == "" {
		date = "date unknown"
	}
	fmt.Fprintf(opts.IO.ErrOut, "Tranco list %s (%s, sha256 %s) %s %s; --list-id %s reruns it\n",
		tl.ID, date, info.SHA256, how, tl.Path, tl.ID)
	return ds, info, nil
}

func names(ps []probe.Path) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

// checkRaw refuses a raw method the process cannot open raw sockets for,
// before the output is touched: every probe would fail, and the run would
// look like one of unresponsive targets.
func checkRaw(method string, fam probe.Family) error {
	proto := map[string]string{"tcp-syn": "tcp", "icmp": "icmp"}[method]
	if proto == "" || (method == "tcp-syn" && runtime.GOOS != "linux") {
		return nil
	}
	f := probe.Family4
	if fam == probe.Family6 {
		f = probe.Family6
	}
	if err := probe.CheckRaw(f, proto); errors.Is(err, os.ErrPermission) {
		return cmdutil.MissingCapability("CAP_NET_RAW", "--method "+method+" (raw sockets)", err)
	}
	return nil
}

// parseNAT64Prefix reads PATH=PREFIX: an IPv6 prefix of an RFC 6052
// length (§2.2: /32, /40, /48, /56, /64, /96) with bits 64-71 zero.
func parseNAT64Prefix(s string) (string, netip.Prefix, error) {
	name, v, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return "", netip.Prefix{}, fmt.Errorf("%q: want PATH=PREFIX, e.g. wwan0=64:ff9b::/96", s)
	}
	p, err := netip.ParsePrefix(strings.TrimSpace(v))
	switch {
	case err != nil:
		return "", netip.Prefix{}, fmt.Errorf("%s: %v", name, err)
	case !p.Addr().Is6() || p.Addr().Is4In6():
		return "", netip.Prefix{}, fmt.Errorf("%s: %s is not an IPv6 prefix", name, p)
	case !slices.Contains([]int{32, 40, 48, 56, 64, 96}, p.Bits()):
		return "", netip.Prefix{}, fmt.Errorf("%s: %s: RFC 6052 prefixes are /32, /40, /48, /56, /64 or /96", name, p)
	case p != p.Masked():
		return "", netip.Prefix{}, fmt.Errorf("%s: %s has host bits set (the prefix is %s)", name, p, p.Masked())
	case p.Addr().As16()[8] != 0:
		return "", netip.Prefix{}, fmt.Errorf("%s: %s: bits 64-71 must be zero (RFC 6052 §2.2)", name, p)
	}
	return name, p, nil
}
