// Package fetch is `mptester fetch URL`: one HTTP(S) object downloaded
// over two paths at once with byte ranges (MPHTTP, 003 §4.2-4.3).
package fetch

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/mphttp"
	"github.com/mptester/mptester/patterns"
	"github.com/mptester/mptester/probe"
)

// Options for `mptester fetch`.
type Options struct {
	IO     *cmdutil.IOStreams
	Logger *slog.Logger

	URL       string
	Paths     []string
	DNS       []string
	Family    string
	Output    string
	JSON      bool
	Tolerance time.Duration
	MemoryCap int64
	Insecure  bool
	// StallTimeout ends a fetch that receives nothing on any path for
	// this long (0: patterns.DefaultStallTimeout); Timeout ends it after
	// this long in all (0: never).
	StallTimeout time.Duration
	Timeout      time.Duration

	// Discover lists the paths (replaced in tests).
	Discover func(ctx context.Context) ([]probe.Path, error)
}

// Result is the --json document.
type Result struct {
	*mphttp.Result
	Resolution []patterns.ServerResolution `json:"resolution"`
}

// NewCmdFetch builds the command; runF replaces fetchRun in tests.
func NewCmdFetch(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, StallTimeout: patterns.DefaultStallTimeout}
	opts.Discover = func(ctx context.Context) ([]probe.Path, error) { return f.DiscoverPaths(ctx, opts.DNS) }
	cmd := &cobra.Command{
		Use:   "fetch URL",
		Short: "Download an HTTP(S) object over two paths at once (MPHTTP)",
		Long: `Download one object from any HTTP or HTTPS server over two paths at once
with byte-range requests (MPHTTP, study 003 §4.2-4.3). The first path
(Wi-Fi by preference) asks for the whole object; the second fetches ranges
from the end, sized so both finish together, and only when the first alone
would take longer than --tolerance. The two paths' ranges overlap by a few
KB that must be identical, and their ETag and Last-Modified must agree;
otherwise the second path's data is dropped and the first finishes alone.
A server that ignores ranges is fetched over the first path.

The host is resolved on each path by that path's own DNS servers (as
run --server does) and each path's connection is bound to it. The output
is written in order; on failure a partly written file is removed. A fetch
that receives nothing on any path for --stall-timeout ends with an error
naming the URL and the byte reached, as does one still running after
--timeout.`,
		Example: `  mptester fetch http://cdn.example.net/video.mp4 --paths wlan0,wwan0 -o video.mp4
  mptester fetch https://198.18.200.1/bulk/10000000/x --insecure -o /dev/null --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Logger, opts.URL = f.Logger, args[0]
			return cmdutil.Dispatch(cmd.Context(), opts, runF, fetchRun)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&opts.Paths, "paths", nil, "the two `IFACES` to use, preferred first (default: every up path with a default route, Wi-Fi first)")
	fl.StringArrayVar(&opts.DNS, "dns", nil, "use `IFACE=ADDR[,ADDR]` as the resolvers of IFACE for the host (repeatable)")
	fl.StringVar(&opts.Family, "family", "any", "address family of the connections: 4, 6 or any")
	fl.DurationVar(&opts.Tolerance, "tolerance", mphttp.DefaultTolerance, "use the second path only when the first alone would take longer than this (003 §4.2)")
	fl.Int64Var(&opts.MemoryCap, "memory-cap", mphttp.DefaultMemoryCap, "most `BYTES` held in memory (the second path's ranges)")
	fl.BoolVar(&opts.JSON, "json", false, "print the result (per-path bytes, timings, consistency) as JSON on stdout")
	fl.BoolVar(&opts.Insecure, "insecure", false, "do not verify the server certificate")
	fl.DurationVar(&opts.StallTimeout, "stall-timeout", opts.StallTimeout, "end the fetch when no path receives anything for this long")
	fl.DurationVar(&opts.Timeout, "timeout", 0, "end the fetch after this long in all (0: no limit)")
	cmdutil.OutputFlag(cmd, &opts.Output, "write the object to `FILE` (- for stdout)")
	return cmd
}

// check validates every input before anything is touched.
func check(opts *Options) (*url.URL, probe.Family, error) {
	u, err := url.Parse(opts.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return nil, 0, cmdutil.FlagErrorf("URL %q: want http:// or https:// with a host", opts.URL)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
			return nil, 0, cmdutil.FlagErrorf("URL %q: invalid port", opts.URL)
		}
	}
	if opts.Tolerance < 0 {
		return nil, 0, cmdutil.FlagErrorf("--tolerance %v: must not be negative", opts.Tolerance)
	}
	if opts.StallTimeout < 0 {
		return nil, 0, cmdutil.FlagErrorf("--stall-timeout %v: must not be negative", opts.StallTimeout)
	}
	if opts.Timeout < 0 {
		return nil, 0, cmdutil.FlagErrorf("--timeout %v: must not be negative", opts.Timeout)
	}
	if opts.MemoryCap <= 0 {
		return nil, 0, cmdutil.FlagErrorf("--memory-cap %d: must be positive", opts.MemoryCap)
	}
	fam := probe.FamilyAny
	switch opts.Family {
	case "4":
		fam = probe.Family4
	case "6":
		fam = probe.Family6
	case "any":
	default:
		return nil, 0, cmdutil.FlagErrorf("--family %q: want 4, 6 or any", opts.Family)
	}
	if opts.JSON && (opts.Output == "" || opts.Output == "-") {
		return nil, 0, cmdutil.FlagErrorf("--json prints the result on stdout: write the object elsewhere with -o FILE")
	}
	if err := cmdutil.CheckOutput(opts.Output); err != nil {
		return nil, 0, cmdutil.Usage(fmt.Errorf("--output: %w", err))
	}
	return u, fam, nil
}

func fetchRun(ctx context.Context, opts *Options) error {
	u, fam, err := check(opts)
	if err != nil {
		return err
	}
	stall := opts.StallTimeout
	if stall == 0 {
		stall = patterns.DefaultStallTimeout
	}
	all, err := opts.Discover(ctx)
	if err != nil {
		return err
	}
	paths, err := cmdutil.SelectPaths(all, opts.Paths)
	if err != nil {
		return err
	}
	if len(opts.Paths) == 0 {
		paths = wifiFirst(paths)
	}
	if len(paths) > 2 {
		return cmdutil.FlagErrorf("--paths: MPHTTP uses two paths, %d selected (%s); name two", len(paths), pathNames(paths))
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	var (
		mp   []mphttp.Path
		recv []*atomic.Int64 // bytes each path received
		res  = Result{Resolution: []patterns.ServerResolution{}}
		cw   *countWriter
	)
	stalled := func(int64) error {
		var per []string
		for i, p := range mp {
			per = append(per, fmt.Sprintf("%s %d B", p.Name, recv[i].Load()))
		}
		return &patterns.StallError{What: fmt.Sprintf("fetch %s (received: %s)", u, strings.Join(per, ", ")), At: cw.n.Load(), Timeout: stall}
	}
	tctx := ctx
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		tctx, cancel = context.WithTimeoutCause(ctx, opts.Timeout, errTimeout)
		defer cancel()
	}
	var watch *patterns.StallWatch // set before the first dial
	for _, p := range paths {
		addrs, sr, err := patterns.ResolveOnPath(tctx, p, u.Hostname(), fam, opts.Logger)
		if err != nil {
			if errors.Is(context.Cause(tctx), errTimeout) && ctx.Err() == nil {
				return fmt.Errorf("fetch %s: %w (%v) resolving %s", u, errTimeout, opts.Timeout, u.Hostname())
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if opts.Logger != nil {
				opts.Logger.Warn("host not resolved on this path; not using it", "path", p.Name, "err", err)
			}
			continue
		}
		res.Resolution = append(res.Resolution, sr)
		n := new(atomic.Int64)
		recv = append(recv, n)
		mp = append(mp, mphttp.Path{Name: p.Name, Transport: pathTransport(p, addrs, port, fam, u.Hostname(), opts.Insecure,
			func(k int) { n.Add(int64(k)); watch.Progress(k) })})
	}
	if len(mp) == 0 {
		return fmt.Errorf("fetch: %s resolves on none of the paths (%s)", u.Hostname(), pathNames(paths))
	}
	out, closeOut, err := cmdutil.CreateOutput("--output", opts.Output, opts.IO.Out)
	if err != nil {
		return err
	}
	cw = &countWriter{w: out}
	watch, fctx, stopWatch := patterns.WatchStall(tctx, stall, stalled)
	defer stopWatch()
	stopProgress := progress(opts, cw)
	r, err := mphttp.Fetch(fctx, u.String(), cw, mphttp.Options{Paths: mp, Tolerance: opts.Tolerance, MemoryCap: opts.MemoryCap,
		Header: http.Header{"User-Agent": {"mptester-fetch"}}})
	stopProgress()
	if err != nil {
		// Our own limits, said as such (the transfer saw only a canceled
		// context).
		var se *patterns.StallError
		switch cause := context.Cause(fctx); {
		case errors.As(cause, &se):
			err = se
		case errors.Is(cause, errTimeout) && ctx.Err() == nil:
			err = fmt.Errorf("fetch %s: %w (%v) at byte %d", u, errTimeout, opts.Timeout, cw.n.Load())
		}
	}
	cerr := closeOut()
	if err == nil && cerr != nil {
		err = fmt.Errorf("--output: %w", cerr)
	}
	if err != nil && opts.Output != "" && opts.Output != "-" {
		// Never leave a partial object behind under the requested name.
		_ = os.Remove(opts.Output)
	}
	res.Result = r
	if r != nil {
		if opts.JSON {
			if jerr := cmdutil.WriteJSON(opts.IO.Out, res); jerr != nil && err == nil {
				err = jerr
			}
		} else {
			summary(opts, r)
		}
	}
	return err
}

// errTimeout: the fetch ran for its --timeout.
var errTimeout = errors.New("--timeout reached")

func summary(opts *Options, r *mphttp.Result) {
	var parts []string
	for _, p := range r.Paths {
		parts = append(parts, fmt.Sprintf("%s %d B", p.Name, p.Bytes))
	}
	fmt.Fprintf(opts.IO.ErrOut, "fetched %d bytes in %v (%.1f Mbit/s): %s; consistency %s", r.Bytes, r.Duration.Round(time.Millisecond), r.RateBps/1e6, strings.Join(parts, ", "), r.Consistency)
	if r.Fallback != "" {
		fmt.Fprintf(opts.IO.ErrOut, " (%s)", r.Fallback)
	}
	fmt.Fprintln(opts.IO.ErrOut)
}

// pathTransport is an HTTP client whose connections leave by p and go to
// the addresses p resolved, whatever the dialled name; received is told
// the bytes each read brings.
func pathTransport(p probe.Path, addrs []netip.Addr, port string, fam probe.Family, host string, insecure bool, received func(int)) http.RoundTripper {
	tr := &http.Transport{
		Proxy:             nil,
		ForceAttemptHTTP2: true,
		TLSClientConfig:   &tls.Config{ServerName: host, InsecureSkipVerify: insecure},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var errs []error
			for _, a := range addrs {
				if fam != probe.FamilyAny && probe.FamilyOf(a) != fam {
					continue
				}
				c, err := probe.DialContext(ctx, p, "tcp", net.JoinHostPort(a.String(), port))
				if err == nil {
					return countConn{c, received}, nil
				}
				errs = append(errs, err)
			}
			if len(errs) == 0 {
				return nil, fmt.Errorf("%s: no address of the wanted family for %s", p.Name, host)
			}
			return nil, errors.Join(errs...)
		},
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		DisableCompression:    true,
	}
	return tr
}

// wifiFirst orders the default paths Wi-Fi first, cellular last (Wi-Fi
// priority, 003 §4.2).
func wifiFirst(ps []probe.Path) []probe.Path {
	rank := func(p probe.Path) int {
		switch p.Kind {
		case probe.KindWiFi:
			return 0
		case probe.KindCellular:
			return 2
		}
		return 1
	}
	out := make([]probe.Path, 0, len(ps))
	for r := range 3 {
		for _, p := range ps {
			if rank(p) == r {
				out = append(out, p)
			}
		}
	}
	return out
}

func pathNames(ps []probe.Path) string {
	n := make([]string, len(ps))
	for i, p := range ps {
		n[i] = p.Name
	}
	return strings.Join(n, ", ")
}

// countConn tells received what each read brought.
type countConn struct {
	net.Conn
	received func(int)
}

func (c countConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.received(n)
	return n, err
}

// countWriter counts the bytes written so far, for the progress line.
type countWriter struct {
	w io.Writer
	n atomic.Int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// progress prints the bytes written and the rate on a terminal's stderr
// every 200 ms until stopped; nothing when stderr is not a terminal.
func progress(opts *Options, cw *countWriter) (stop func()) {
	if !opts.IO.IsStderrTTY() {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(finished)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(opts.IO.ErrOut, "\r\033[K")
				return
			case <-tick.C:
				n := cw.n.Load()
				fmt.Fprintf(opts.IO.ErrOut, "\r\033[K%d bytes, %.1f Mbit/s", n, float64(n)*8/time.Since(start).Seconds()/1e6)
			}
		}
	}()
	return func() { close(done); <-finished }
}
