package run

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/mptester/mptester/internal/cmd/serve"
	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/patterns"
	"github.com/mptester/mptester/patterns/transport"
)

// seamName is a transport this file alone defines: TLS over TCP under
// another name, with a listener of its own.
const seamName = "tcpseam"

// registerSeam registers the test transport for the duration of a test
// (it would otherwise join the default matrix of every test here).
func registerSeam(t *testing.T) {
	tcp, err := transport.Get("tcp")
	if err != nil {
		t.Fatal(err)
	}
	unregister := transport.Register(transport.Descriptor{Name: seamName, Help: "TLS over TCP under a test's name",
		Order: 99, Network: "tcp",
		New: func(o transport.Options) (transport.Transport, error) {
			inner, err := tcp.New(o)
			return renamed{inner}, err
		},
		Listen: tcp.Listen})
	t.Cleanup(unregister)
}

type renamed struct{ transport.Transport }

func (renamed) Name() string { return seamName }

func (r renamed) Dial(ctx context.Context, addr netip.AddrPort, family string) (transport.Conn, error) {
	c, err := r.Transport.Dial(ctx, addr, family)
	if err != nil {
		return nil, err
	}
	return renamedConn{c}, nil
}

type renamedConn struct{ transport.Conn }

func (c renamedConn) Info() transport.Info {
	i := c.Conn.Info()
	i.Transport = seamName
	return i
}

// TestSeam: a transport defined only in this file shows up in serve's
// flags, help and listeners, in run's --transports, flags and matrix, and
// in the results, with nothing else changed.
func TestSeam(t *testing.T) {
	startServer(t, false) // skips off Linux
	registerSeam(t)
	port := freeTCPPort(t)

	io, out, _ := cmdutil.Test()
	f := &cmdutil.Factory{IO: io, Logger: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan *patterns.Server, 1)
	scmd := serve.NewCmdServe(f, func(ctx context.Context, o *serve.Options) error {
		o.Ready = func(s *patterns.Server) { ready <- s }
		return serve.Run(ctx, o)
	})
	if !strings.Contains(scmd.Long, seamName) || scmd.Flags().Lookup(seamName+"-port") == nil {
		t.Fatalf("serve does not list %s: %s", seamName, scmd.Long)
	}
	scmd.SetArgs([]string{"--listen", "127.0.0.1", "--tcp-port", "0", "--quic-port", "0", "--" + seamName + "-port", fmt.Sprint(port),
		"--transports", seamName})
	scmd.SetContext(ctx)
	done := make(chan error, 1)
	go func() { done <- scmd.Execute() }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case srv := <-ready:
		if b := srv.Bound(); len(b) != 1 || b[0].Transport != seamName {
			t.Fatalf("serve bound %+v, want only %s", b, seamName)
		}
	case err := <-done:
		t.Fatal(err)
	case <-time.After(5 * time.Second):
		t.Fatal("server did not start")
	}
	if want := fmt.Sprintf("%s 127.0.0.1:%d", seamName, port); !strings.Contains(out.String(), want) {
		t.Fatalf("serve printed %q, want %q", out.String(), want)
	}

	stdout, errOut, err := execute(t, nil, "--server", "127.0.0.1", "--"+seamName+"-port", fmt.Sprint(port), "--insecure",
		"--paths", "lo", "--transports", seamName, "--size", "100000", "--duration", "300ms", "--interval", "50ms",
		"--ping-count", "3", "--pace", "0")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	var doc struct {
		Records []struct {
			Config      patterns.TestConfig `json:"config"`
			Status      string              `json:"status"`
			Error       string              `json:"error"`
			Connections []struct {
				Transport string            `json:"transport"`
				Samples   []json.RawMessage `json:"samples"`
			} `json:"connections"`
		} `json:"records"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatal(err)
	}
	pats := map[string]bool{}
	for _, r := range doc.Records {
		if r.Config.Transport != seamName || r.Status != "success" {
			t.Errorf("%s/%s: %s %s", r.Config.Pattern, r.Config.Transport, r.Status, r.Error)
		}
		pats[r.Config.Pattern] = true
		for _, c := range r.Connections {
			if c.Transport != seamName || len(c.Samples) == 0 || !strings.Contains(string(c.Samples[0]), `"tcp_info"`) {
				t.Errorf("%s: connection %s with %d samples", r.Config.Pattern, c.Transport, len(c.Samples))
			}
		}
	}
	if len(pats) != len(patterns.Names()) {
		t.Errorf("matrix ran %v, want every pattern", pats)
	}
}

func freeTCPPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
