// Package serve implements `mptester serve`.
package serve

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/internal/config"
	"github.com/mptester/mptester/patterns"
)

// Options for `mptester serve`.
type Options struct {
	IO     *cmdutil.IOStreams
	Logger *slog.Logger
	Ctx    context.Context

	Listen    string
	TCPPort   int
	QUICPorts []int
	CertFile  string
	KeyFile   string
	Names     []string
	NoMPTCP   bool
	Limits    patterns.Limits
	// Ready, when set, is called with the server once it listens (tests).
	Ready func(*patterns.Server)
}

// NewCmdServe builds the command; runF replaces serveRun in tests.
func NewCmdServe(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Limits: patterns.DefaultLimits()}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a test server for the ping, bulk, iperf and interactive patterns",
		Long: `Serve every traffic pattern to mptester probes:

  TCP  TLS on --tcp-port with HTTP/1.1 and HTTP/2 (ping, bulk) and one ALPN
       per stream pattern (iperf, interactive); the listener accepts MPTCP.
  QUIC on each --quic-port (443 and 6121 by default: 6121 reveals middleboxes
       that only treat UDP 443 specially) with HTTP/3 and the same stream ALPNs.

Without --cert/--key a self-signed certificate is generated and its SHA-256
fingerprint printed on stdout; probes pin it with --pin. SIGINT/SIGTERM stop
accepting, let running tests finish (up to 10 s) and exit.`,
		Example: `  mptester serve
  mptester serve --tcp-port 8443 --quic-port 8443 --quic-port 6121 --cert cert.pem --key key.pem`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Logger = f.Logger
			opts.Ctx = cmd.Context()
			if runF != nil {
				return runF(opts)
			}
			return serveRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Listen, "listen", "", "`ADDR` to listen on (default: every address)")
	fl.IntVar(&opts.TCPPort, "tcp-port", 443, "TLS/TCP port (0: disabled)")
	fl.IntSliceVar(&opts.QUICPorts, "quic-port", []int{443, 6121}, "QUIC/UDP `PORT`s (repeatable)")
	fl.StringVar(&opts.CertFile, "cert", "", "PEM certificate `file` (default: self-signed)")
	fl.StringVar(&opts.KeyFile, "key", "", "PEM private key `file`")
	fl.StringSliceVar(&opts.Names, "name", nil, "extra DNS `NAME`s or IPs for the self-signed certificate")
	fl.BoolVar(&opts.NoMPTCP, "no-mptcp", false, "plain TCP listener (MPTCP clients fall back to TCP)")
	fl.IntVar(&opts.Limits.MaxSessions, "max-sessions", opts.Limits.MaxSessions, "concurrent sessions over all clients")
	fl.IntVar(&opts.Limits.MaxPerClient, "max-per-client", opts.Limits.MaxPerClient, "concurrent sessions per client (an IPv6 /64, an IPv4 --client-prefix4)")
	fl.IntVar(&opts.Limits.ClientPrefix4, "client-prefix4", opts.Limits.ClientPrefix4, "IPv4 prefix `length` counted as one client by --max-per-client")
	fl.Int64Var(&opts.Limits.MaxBulk, "max-bulk", opts.Limits.MaxBulk, "largest bulk download in `bytes`")
	fl.DurationVar(&opts.Limits.MaxDuration, "max-duration", opts.Limits.MaxDuration, "longest iperf/interactive test")
	fl.DurationVar(&opts.Limits.HandshakeTimeout, "handshake-timeout", opts.Limits.HandshakeTimeout, "limit on a TLS handshake (which holds no session slot)")
	fl.DurationVar(&opts.Limits.ReadTimeout, "read-timeout", opts.Limits.ReadTimeout, "wait for a request or the next frame")
	fl.DurationVar(&opts.Limits.IdleTimeout, "idle-timeout", opts.Limits.IdleTimeout, "close idle connections after")
	return cmd
}

// check validates every flag, each bad value its own message naming it.
func check(opts *Options) error {
	var ch config.Checker
	if (opts.CertFile == "") != (opts.KeyFile == "") {
		ch.Check("--cert", fmt.Errorf("--cert and --key go together"))
	}
	ch.Check("--tcp-port", config.IntIn(opts.TCPPort, 0, 65535))
	ports := make([]string, 0, len(opts.QUICPorts))
	for _, p := range opts.QUICPorts {
		ch.Check("--quic-port", config.IntIn(p, 1, 65535))
		ports = append(ports, strconv.Itoa(p))
	}
	ch.Check("--quic-port", config.Unique(ports))
	if opts.TCPPort == 0 && len(opts.QUICPorts) == 0 {
		ch.Check("--tcp-port", fmt.Errorf("0 and no --quic-port: nothing to serve"))
	}
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
	return cmdutil.Usage(ch.Err())
}

func serveRun(opts *Options) error {
	if err := check(opts); err != nil {
		return err
	}
	var (
		cert tls.Certificate
		fp   string
		err  error
	)
	if opts.CertFile != "" {
		cert, fp, err = patterns.LoadCertificate(opts.CertFile, opts.KeyFile)
		if err != nil {
			return fmt.Errorf("%w: %w", cmdutil.ErrUsage, err)
		}
	} else if cert, fp, err = patterns.SelfSigned(opts.Names); err != nil {
		return err
	}
	cfg := patterns.ServerConfig{Certificate: cert, NoMPTCP: opts.NoMPTCP, Limits: opts.Limits, Logger: opts.Logger}
	if opts.TCPPort > 0 {
		cfg.TCPAddr = net.JoinHostPort(opts.Listen, strconv.Itoa(opts.TCPPort))
	}
	for _, p := range opts.QUICPorts {
		cfg.QUICAddrs = append(cfg.QUICAddrs, net.JoinHostPort(opts.Listen, strconv.Itoa(p)))
	}
	srv, err := patterns.NewServer(cfg)
	if err != nil {
		return cmdutil.FlagErrorf("%v", err)
	}
	ctx := opts.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	if err := srv.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "certificate SHA-256 fingerprint: %s\n", fp)
	if a := srv.TCPAddr(); a != nil {
		fmt.Fprintf(opts.IO.Out, "tcp  %s (TLS: h2, http/1.1, stream patterns; MPTCP %s)\n", a, map[bool]string{true: "off", false: "on"}[opts.NoMPTCP])
	}
	for _, a := range srv.QUICAddrs() {
		fmt.Fprintf(opts.IO.Out, "quic %s (h3, stream patterns)\n", a)
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
