package serve

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/patterns"
)

func TestFlagsReachOptions(t *testing.T) {
	io, _, _ := cmdutil.Test()
	var got *Options
	cmd := NewCmdServe(&cmdutil.Factory{IO: io, Logger: slog.New(slog.DiscardHandler)}, func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.SetArgs([]string{"--tcp-port", "8443", "--quic-port", "8443", "--quic-port", "6121", "--max-bulk", "1000", "--max-per-client", "2"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if tcp, quic := got.Ports["tcp"], got.Ports["quic"]; len(tcp) != 1 || tcp[0] != 8443 || len(quic) != 2 || quic[1] != 6121 || got.Limits.MaxBulk != 1000 || got.Limits.MaxPerClient != 2 {
		t.Fatalf("options %+v", got)
	}
}

func TestBadFlags(t *testing.T) {
	io, _, _ := cmdutil.Test()
	for _, args := range [][]string{{"--cert", "x.pem"}, {"--quic-port", "0,443"}, {"--tcp-port", "70000"}, {"--transports", "nosuch"}, {"--max-duration", "0s"}, {"--qlog", "/dev/null"}, {"--state", "/dev/null"}, {"--state", "d", "--cert", "c.pem", "--key", "k.pem"}} {
		opts := &Options{IO: io, Logger: slog.New(slog.DiscardHandler), Limits: patterns.DefaultLimits(), Ports: map[string][]int{"tcp": {443}, "quic": {443}}}
		cmd := NewCmdServe(&cmdutil.Factory{IO: io, Logger: slog.New(slog.DiscardHandler)}, func(ctx context.Context, o *Options) error { *opts = *o; return serveRun(ctx, o) })
		cmd.SetArgs(args)
		if err := cmd.Execute(); !errors.Is(err, cmdutil.ErrUsage) {
			t.Errorf("%v: err %v, want usage error", args, err)
		}
	}
}

// TestServeGracefulShutdown: the server prints its fingerprint, serves, and
// returns promptly once its context is cancelled (SIGTERM).
func TestServeGracefulShutdown(t *testing.T) {
	io, out, _ := cmdutil.Test()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan *patterns.Server, 1)
	port := freePort(t)
	opts := &Options{IO: io, Logger: slog.New(slog.DiscardHandler), Listen: "127.0.0.1",
		Ports: map[string][]int{"tcp": {port}}, Limits: patterns.DefaultLimits(), Ready: func(s *patterns.Server) { ready <- s }}
	done := make(chan error, 1)
	go func() { done <- serveRun(ctx, opts) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatal(err)
	case <-time.After(5 * time.Second):
		t.Fatal("server did not start")
	}
	if !strings.Contains(out.String(), "certificate SHA-256 fingerprint: ") {
		t.Fatalf("no fingerprint printed: %q", out.String())
	}
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(12 * time.Second):
		t.Fatal("shutdown hung")
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("idle server took %v to stop", el)
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestStateKeepsFingerprint: with --state a restarted server presents the
// certificate (the fingerprint) it printed before; without, a new one.
func TestStateKeepsFingerprint(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	start := func(state string) string {
		io, out, _ := cmdutil.Test()
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan *patterns.Server, 1)
		opts := &Options{IO: io, Logger: slog.New(slog.DiscardHandler), Listen: "127.0.0.1", State: state,
			Ports: map[string][]int{"tcp": {freePort(t)}}, Limits: patterns.DefaultLimits(), Ready: func(s *patterns.Server) { ready <- s }}
		done := make(chan error, 1)
		go func() { done <- serveRun(ctx, opts) }()
		select {
		case <-ready:
		case err := <-done:
			t.Fatal(err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`fingerprint: (\S+)`).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("no fingerprint in %q", out.String())
		}
		return m[1]
	}
	first := start(state)
	if again := start(state); again != first {
		t.Errorf("restart with --state: fingerprint %s, was %s", again, first)
	}
	if st, err := os.Stat(filepath.Join(state, "serve-cert.pem")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("kept certificate: %v %v", st, err)
	}
	if other := start(""); other == first {
		t.Error("without --state the certificate is new each start")
	}
}

// TestConfigSection: the serve section (the service's serve.yaml) fills
// the options; a flag overrides its key; a bad key fails at load.
func TestConfigSection(t *testing.T) {
	io, _, _ := cmdutil.Test()
	NewCmdServe(&cmdutil.Factory{IO: io}, nil) // registers the listener check
	cfg, err := cmdutil.ParseConfig([]byte("serve:\n  listen: 198.18.0.1\n  ports: {tcp: [8443], quic: [8443, 6121]}\n  state: /var/lib/x\n  max_sessions: 500\n  names: [a.example]\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got *Options
	cmd := NewCmdServe(&cmdutil.Factory{IO: io, Config: cfg}, func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.SetArgs([]string{"--quic-port", "443"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Listen != "198.18.0.1" || got.Ports["tcp"][0] != 8443 || len(got.Ports["quic"]) != 1 || got.Ports["quic"][0] != 443 ||
		got.State != "/var/lib/x" || got.Limits.MaxSessions != 500 || got.Names[0] != "a.example" {
		t.Errorf("options %+v", got)
	}
	// The packaged /etc/mptester/serve.yaml loads and is what serve runs with.
	pkg, err := cmdutil.LoadConfig("../../../packaging/serve.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cmd = NewCmdServe(&cmdutil.Factory{IO: io, Config: pkg}, func(_ context.Context, o *Options) error { got = o; return check(o) })
	cmd.SetArgs(nil)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Ports["tcp"][0] != 443 || len(got.Ports["quic"]) != 2 || got.Limits.MaxSessions != 256 {
		t.Errorf("packaged serve.yaml: %+v", got)
	}
	for _, bad := range []string{"serve:\n  ports: {sctp: [1]}\n", "serve:\n  max_sessions: 0\n", "serve:\n  ports: {tcp: [70000]}\n", "serve:\n  nope: 1\n"} {
		if _, err := cmdutil.ParseConfig([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
