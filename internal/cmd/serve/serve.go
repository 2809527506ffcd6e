// Package serve implements `mptester serve`.
package serve

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/internal/certs"
	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/internal/config"
	"github.com/mptester/mptester/mpquic"
	"github.com/mptester/mptester/patterns"
	"github.com/mptester/mptester/patterns/transport"
)

// Options for `mptester serve`.
type Options struct {
	IO     *cmdutil.IOStreams
	Logger *slog.Logger

	Listen string
	// Ports per listening transport (--<transport>-port); 0 disables it.
	Ports      map[string][]int
	Transports []string
	CertFile   string
	KeyFile    string
	Names      []string
	Limits     patterns.Limits
	QlogDir    string
	// State keeps the self-signed certificate across restarts.
	State string
	// MPQUICRetry: mpquic clients prove their address with a Retry first.
	MPQUICRetry bool
	// MPQUICCC is mpquic's congestion control (--mpquic-cc).
	MPQUICCC string
	// Ready, when set, is called with the server once it listens (tests).
	Ready func(*patterns.Server)
}

// NewCmdServe builds the command; runF replaces serveRun in tests.
func NewCmdServe(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Limits: patterns.DefaultLimits()}
	portFlags := map[string]*[]int{}
	var listeners strings.Builder
	for _, d := range transport.Listeners() {
		var served []string
		for _, t := range transport.All() {
			if t.Listener() == d.Name {
				served = append(served, t.Name)
			}
		}
		fmt.Fprintf(&listeners, "  %-5s %s, on --%s-port; serves %s\n", d.Name, d.Help, d.Name, strings.Join(served, ", "))
	}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a test server for the ping, bulk, iperf and interactive patterns",
		Long: `Serve every traffic pattern to mptester probes over every transport:

` + listeners.String() + `
Every listener offers the HTTP patterns (ping, bulk: HTTP/1.1 and HTTP/2
over TLS/TCP, HTTP/3 over QUIC) and one ALPN per stream pattern (iperf,
interactive). QUIC also listens on 6121 by default: it reveals middleboxes
that only treat UDP 443 specially (000 §III).

Without --cert/--key a self-signed certificate is generated and its SHA-256
fingerprint printed on stdout; probes pin it with --pin. With --state it
is made once and kept there (DIR/serve-cert.pem), so a restart keeps the
fingerprint. SIGINT/SIGTERM stop
accepting, let running tests finish (up to 10 s) and exit.`,
		Example: `  mptester serve
  mptester serve --tcp-port 8443 --quic-port 8443 --quic-port 6121 --cert cert.pem --key key.pem`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Logger = f.Logger
			opts.Ports = map[string][]int{}
			for name, p := range portFlags {
				opts.Ports[name] = *p
			}
			applyConfig(opts, f.Config, cmd.Flags().Changed)
			return cmdutil.Dispatch(cmd.Context(), opts, runF, serveRun)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Listen, "listen", "", "`ADDR` to listen on (default: every address)")
	for _, d := range transport.Listeners() {
		def := []int{int(d.DefaultPort)}
		if d.AltPort != 0 {
			def = append(def, int(d.AltPort))
		}
		ports := new([]int)
		portFlags[d.Name] = ports
		fl.IntSliceVar(ports, d.Name+"-port", def, d.Help+" `PORT`s (repeatable; 0: disabled)")
	}
	fl.StringSliceVar(&opts.Transports, "transports", nil, "`TRANSPORTS` to serve (default: "+strings.Join(transport.Names(), ",")+")")
	fl.StringVar(&opts.CertFile, "cert", "", "PEM certificate `file` (default: self-signed)")
	fl.StringVar(&opts.KeyFile, "key", "", "PEM private key `file`")
	fl.StringVar(&opts.State, "state", "", "`directory` that keeps the self-signed certificate across restarts (the service's StateDirectory)")
	fl.StringSliceVar(&opts.Names, "name", nil, "extra DNS `NAME`s or IPs for the self-signed certificate")
	fl.IntVar(&opts.Limits.MaxSessions, "max-sessions", opts.Limits.MaxSessions, "concurrent sessions over all clients")
	fl.IntVar(&opts.Limits.MaxPerClient, "max-per-client", opts.Limits.MaxPerClient, "concurrent sessions per client (an IPv6 /64, an IPv4 --client-prefix4)")
	fl.IntVar(&opts.Limits.ClientPrefix4, "client-prefix4", opts.Limits.ClientPrefix4, "IPv4 prefix `length` counted as one client by --max-per-client")
	fl.Int64Var(&opts.Limits.MaxBulk, "max-bulk", opts.Limits.MaxBulk, "largest bulk download in `bytes`")
	fl.DurationVar(&opts.Limits.MaxDuration, "max-duration", opts.Limits.MaxDuration, "longest iperf/interactive test")
	fl.DurationVar(&opts.Limits.HandshakeTimeout, "handshake-timeout", opts.Limits.HandshakeTimeout, "limit on a TLS handshake (which holds no session slot)")
	fl.DurationVar(&opts.Limits.ReadTimeout, "read-timeout", opts.Limits.ReadTimeout, "wait for a request or the next frame")
	fl.DurationVar(&opts.Limits.IdleTimeout, "idle-timeout", opts.Limits.IdleTimeout, "close idle connections after")
	fl.BoolVar(&opts.MPQUICRetry, "mpquic-retry", false, "have every mpquic client prove its address with a Retry first (RFC 9000 §8.1.2; without it only under a flood of handshakes)")
	fl.StringVar(&opts.QlogDir, "qlog", "", "write a qlog trace of every QUIC connection (quic, mpquic) to `DIR`/ODCID_server.sqlog")
	fl.StringVar(&opts.MPQUICCC, "mpquic-cc", string(mpquic.CongestionCUBIC), "mpquic's congestion control of the paths it sends on: cubic, newreno, or lia (coupled, RFC 6356)")
	return cmd
}

// applyConfig fills what the command line left unset from the config's
// serve section (checked when it was loaded): flags override the file.
func applyConfig(opts *Options, cfg *config.Config, changed func(string) bool) {
	if cfg == nil {
		return
	}
	c := cfg.Serve
	set := func(key, flag string, apply func()) {
		if cfg.Has("serve."+key) && !changed(flag) {
			apply()
		}
	}
	set("listen", "listen", func() { opts.Listen = c.Listen })
	for name, ports := range c.Ports {
		set("ports."+name, name+"-port", func() { opts.Ports[name] = ports })
	}
	set("transports", "transports", func() { opts.Transports = c.Transports })
	set("names", "name", func() { opts.Names = c.Names })
	set("state", "state", func() { opts.State = c.State })
	set("max_sessions", "max-sessions", func() { opts.Limits.MaxSessions = c.MaxSessions })
	set("max_per_client", "max-per-client", func() { opts.Limits.MaxPerClient = c.MaxPerClient })
	set("max_duration", "max-duration", func() { opts.Limits.MaxDuration = c.MaxDuration.D() })
}

// check validates every flag, each bad value its own message naming it.
func check(opts *Options) error {
	var ch config.Checker
	if (opts.CertFile == "") != (opts.KeyFile == "") {
		ch.Check("--cert", fmt.Errorf("--cert and --key go together"))
	}
	serving := 0
	for _, name := range slices.Sorted(maps.Keys(opts.Ports)) {
		flag := "--" + name + "-port"
		ports := make([]string, 0, len(opts.Ports[name]))
		for _, p := range opts.Ports[name] {
			lo := 1
			if len(opts.Ports[name]) == 1 {
				lo = 0 // a lone 0 disables the listener
			}
			ch.Check(flag, config.IntIn(p, lo, 65535))
			if p > 0 {
				serving++
			}
			ports = append(ports, strconv.Itoa(p))
		}
		ch.Check(flag, config.Unique(ports))
	}
	if serving == 0 {
		ch.Check("--"+transport.Listeners()[0].Name+"-port", fmt.Errorf("every port is 0: nothing to serve"))
	}
	ch.Check("--transports", config.Names(opts.Transports, transport.CheckName))
	l := opts.Limits
	ch.Check("--max-sessions", config.Positive(l.MaxSessions))
	ch.Check("--max-per-client", config.Positive(l.MaxPerClient))
	if l.MaxPerClient > l.MaxSessions && l.MaxSessions > 0 {
		ch.Check("--max-per-client", fmt.Errorf("%d exceeds --max-sessions %d", l.MaxPerClient, l.MaxSessions))
	}
	ch.Check("--client-prefix4", config.IntIn(l.ClientPrefix4, 8, 32))
	ch.Check("--max-bulk", config.Positive(l.MaxBulk))
	ch.Check("--max-duration", config.Positive(l.MaxDuration))
	ch.Check("--handshake-timeout", config.NonNegative(l.HandshakeTimeout))
	ch.Check("--read-timeout", config.Positive(l.ReadTimeout))
	ch.Check("--idle-timeout", config.Positive(l.IdleTimeout))
	ch.Check("--qlog", config.OutputDir(opts.QlogDir))
	if opts.State != "" && opts.CertFile != "" {
		ch.Check("--state", fmt.Errorf("--state keeps a self-signed certificate: not with --cert"))
	}
	ch.Check("--state", config.OutputDir(opts.State))
	if _, err := mpquic.ParseCongestionControl(opts.MPQUICCC); err != nil && opts.MPQUICCC != "" {
		ch.Check("--mpquic-cc", err)
	}
	return cmdutil.Usage(ch.Err())
}

// Run serves as the command does (for a runF that sets Options.Ready).
func Run(ctx context.Context, opts *Options) error { return serveRun(ctx, opts) }

func serveRun(ctx context.Context, opts *Options) error {
	if err := check(opts); err != nil {
		return err
	}
	var (
		cert tls.Certificate
		fp   string
		err  error
	)
	if opts.CertFile != "" {
		cert, fp, err = certs.Load(opts.CertFile, opts.KeyFile)
		if err != nil {
			return fmt.Errorf("%w: %w", cmdutil.ErrUsage, err)
		}
	} else if opts.State != "" {
		if err := os.MkdirAll(opts.State, 0o700); err != nil {
			return fmt.Errorf("--state: %w", err)
		}
		file := certs.IdentityFile(filepath.Join(opts.State, "serve-cert.pem"))
		var created bool
		if cert, fp, created, err = certs.Keep(ctx, file, opts.Names); err != nil {
			return err
		}
		if created {
			opts.Logger.Info("self-signed certificate made and kept", "file", file.String())
		}
	} else if cert, fp, err = certs.SelfSigned(opts.Names); err != nil {
		return err
	}
	if opts.QlogDir != "" {
		if err := os.MkdirAll(opts.QlogDir, 0o755); err != nil {
			return fmt.Errorf("--qlog: %w", err)
		}
	}
	cfg := patterns.ServerConfig{Certificate: cert, Transports: opts.Transports, Limits: opts.Limits, Logger: opts.Logger,
		Listen: map[string][]string{}, QlogDir: opts.QlogDir, MPQUICRetry: opts.MPQUICRetry, MPQUICCongestion: mpquic.CongestionControl(opts.MPQUICCC)}
	for name, ports := range opts.Ports {
		for _, p := range ports {
			if p > 0 {
				cfg.Listen[name] = append(cfg.Listen[name], net.JoinHostPort(opts.Listen, strconv.Itoa(p)))
			}
		}
	}
	srv, err := patterns.NewServer(cfg)
	if err != nil {
		return cmdutil.FlagErrorf("%v", err)
	}
	if err := srv.Start(ctx); err != nil {
		return cmdutil.ListenError(err)
	}
	fmt.Fprintf(opts.IO.Out, "certificate SHA-256 fingerprint: %s\n", fp)
	for _, b := range srv.Bound() {
		fmt.Fprintf(opts.IO.Out, "%-5s %s (%s; serves %s)\n", b.Transport, b.Addr, b.Describe, strings.Join(b.Serves, ", "))
	}
	if opts.Ready != nil {
		opts.Ready(srv)
	}
	<-ctx.Done()
	opts.Logger.Info("shutting down", "grace", "10s")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		opts.Logger.Warn("shutdown", "err", err)
	}
	return nil
}
