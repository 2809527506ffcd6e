package patterns

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/probe"
)

func runOpts(t *testing.T, lo probe.Path, srv *testServer, servers ...string) RunOptions {
	return RunOptions{
		Servers: servers, TCPPort: srv.tcpPort, QUICPort: srv.quicPort,
		Patterns: []string{"ping", "bulk"}, Transports: []string{transport.TCP, transport.QUIC},
		Paths: []probe.Path{lo}, Families: []probe.Family{probe.Family4}, Params: smallParams, Seed: 7,
		TLS: func(name string) (*tls.Config, error) { return transport.ClientTLS("localhost", srv.pin, false) },
	}
}

// TestRunSelectsAnsweringServer: a server that does not answer is never
// selected; the matrix then runs in the seeded order.
func TestRunSelectsAnsweringServer(t *testing.T) {
	lo := loopback(t)
	srv := startServer(t, Limits{})
	dead, _ := net.Listen("tcp4", "127.0.0.1:0")
	deadAddr := dead.Addr().String()
	dead.Close() // connection refused from now on
	var mu sync.Mutex
	var recs []any
	o := runOpts(t, lo, srv, deadAddr, fmt.Sprintf("127.0.0.1:%d", srv.tcpPort))
	o.Transports = []string{transport.TCP, transport.MPTCP}
	o.Emit = func(r any) error { mu.Lock(); recs = append(recs, r); mu.Unlock(); return nil }
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Selected != fmt.Sprintf("127.0.0.1:%d", srv.tcpPort) || sum.Tests != 4 || len(sum.Failed) != 0 {
		t.Fatalf("summary %+v", sum)
	}
	sel := recs[0].(SelectionRecord)
	if len(sel.Probes) != 2 || sel.Probes[0].Status != StatusConnectionRefused || sel.Probes[1].Answered != 5 {
		t.Fatalf("selection %+v", sel)
	}
	// Same seed, same order.
	var order1, order2 []string
	for _, r := range recs[1:] {
		c := r.(Record).Config
		order1 = append(order1, c.Pattern+"/"+c.Transport)
	}
	o.Servers = o.Servers[1:]
	o.Emit = func(r any) error {
		if rec, ok := r.(Record); ok {
			order2 = append(order2, rec.Config.Pattern+"/"+rec.Config.Transport)
		}
		return nil
	}
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if strings.Join(order1, " ") != strings.Join(order2, " ") {
		t.Fatalf("seeded order differs: %v vs %v", order1, order2)
	}
}

// TestStableModeNetworkChange: a path losing its address mid-test marks
// that test invalid with the reason and stops the run. The interface list
// is faked (fault injection); the traffic is real.
func TestStableModeNetworkChange(t *testing.T) {
	lo := loopback(t)
	srv := startServer(t, Limits{})
	o := runOpts(t, lo, srv, fmt.Sprintf("127.0.0.1:%d", srv.tcpPort))
	o.Patterns = []string{"interactive"}
	o.Params.Duration = 3 * time.Second
	var calls atomic.Int32
	o.Stable, o.PollEvery = true, 50*time.Millisecond
	o.Discover = func(ctx context.Context) ([]probe.Path, error) {
		p := lo
		if calls.Add(1) > 10 { // ~0.5 s into the run
			p.Addrs = p.Addrs[:0]
		}
		return []probe.Path{p}, nil
	}
	var recs []Record
	o.Emit = func(r any) error {
		if rec, ok := r.(Record); ok {
			recs = append(recs, rec)
		}
		return nil
	}
	start := time.Now()
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Invalid || !strings.Contains(sum.Reason, "network changed during test") || !strings.Contains(sum.Reason, lo.Name) {
		t.Fatalf("summary %+v", sum)
	}
	if len(recs) != 1 || !recs[0].Invalid || recs[0].Status != StatusNetworkChanged {
		t.Fatalf("records %+v", recs)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("run stopped after %v, want right after the change", el)
	}
	if !strings.Contains(recs[0].Error, "network changed during test") {
		t.Fatalf("invalid test error %q lacks the reason", recs[0].Error)
	}
}
