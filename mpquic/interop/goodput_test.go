package interop

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// The runner's two measurements, goodput and crosstraffic, as cases:
// one file over its simple-p2p link (10 Mbit/s, 15 ms each way, a queue
// of 25), crosstraffic with a competing flow on the link. The runner
// only reports the figure; here it is held against the peer-to-peer
// figure (the peer's client against the peer's server) over the same
// link in the same run, so that the machine's load weighs on both.
//
// Departures from the runner, for CI's time: 4 MiB files (the runner's
// are 10 MB and 25 MB), and the competing flow is quic-go's CUBIC over
// QUIC through the same emulated queue (the runner's is iperf's TCP
// CUBIC: kernel TCP cannot pass through the tests' userspace relay).

const goodputBytes = 4 << 20

// Minimum share of the peer-to-peer figure. Both flows fill a 10 Mbit/s
// link in a second; what is left is the stacks' slow start and recovery
// from the queue's drops. With a competitor the split of the link
// between two loss-based flows varies from run to run, so less is asked.
const (
	goodputMinShare = 0.8
	crossMinShare   = 0.5
	// crossMinOther (kbit/s) is what the competing flow must get while
	// the case's file crosses the link, or the case tested nothing.
	crossMinOther = 1000
)

func init() {
	cases = append(cases,
		tcase{name: "goodput", setup: func(o *opts) { o.files = files(goodputBytes) }, fault: onLink(false), check: checkGoodput("goodput", false)},
		tcase{name: "crosstraffic", setup: func(o *opts) { o.files = files(goodputBytes) }, fault: onLink(true), check: checkGoodput("crosstraffic", true)},
	)
}

// onLink puts the run's relay on a runner link of its own, with a
// competing flow already on it when cross.
func onLink(cross bool) func(r *run) func(dir, []byte, time.Time) verdict {
	return func(r *run) func(dir, []byte, time.Time) verdict {
		r.relay.link.Store(newRunnerLink(r.relay.t, cross))
		return nil
	}
}

func newRunnerLink(t *testing.T, cross bool) *link {
	l := runnerLink()
	t.Cleanup(l.close)
	if cross {
		startCrossTraffic(t, l)
	}
	return l
}

// startCrossTraffic runs a bulk download (quic-go to quic-go) across l
// until the test ends, and waits a second for it to fill the link.
func startCrossTraffic(t *testing.T, l *link) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stls, ctls := testTLS(t, "crosstraffic", false)
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := quic.Listen(pc, stls, &quic.Config{MaxIdleTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); pc.Close() })
	go func() {
		c, err := ln.Accept(ctx)
		if err != nil {
			return
		}
		s, err := c.AcceptStream(ctx)
		if err != nil {
			return
		}
		buf := make([]byte, 32<<10)
		for ctx.Err() == nil {
			if _, err := s.Write(buf); err != nil {
				return
			}
		}
	}()
	rl := newRelay(t, pc.LocalAddr())
	rl.link.Store(l)
	c, err := quic.DialAddr(ctx, rl.Addr().String(), ctls, &quic.Config{MaxIdleTimeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("competing flow: %v", err)
	}
	t.Cleanup(func() { c.CloseWithError(0, "") })
	s, err := c.OpenStreamSync(ctx)
	if err != nil {
		t.Fatalf("competing flow: %v", err)
	}
	if _, err := s.Write([]byte("go")); err != nil {
		t.Fatalf("competing flow: %v", err)
	}
	go io.Copy(io.Discard, s)
	time.Sleep(time.Second)
}

// The peer-to-peer figures, one per peer and case in a run.
var (
	refMu sync.Mutex
	refs  = map[string]float64{}
)

// reference is the peer's client fetching the case's file from the
// peer's server over a runner link of its own (with a competing flow
// when cross): the figure the case is held against.
func reference(t *testing.T, p peer, name string, cross bool) float64 {
	t.Helper()
	refMu.Lock()
	defer refMu.Unlock()
	key := p.name() + "/" + name
	if v, ok := refs[key]; ok {
		return v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	o := &opts{alpn: p.alpn(), files: files(goodputBytes)}
	stls, ctls := testTLS(t, o.alpn, false)
	addr, _ := p.serve(t, ctx, o, stls)
	rl := newRelay(t, addr)
	l := newRunnerLink(t, cross)
	rl.link.Store(l)
	got, _, err := p.fetch(t, ctx, o, rl.Addr(), ctls)
	if err != nil {
		t.Fatalf("peer-to-peer %s: %v", p.name(), err)
	}
	for path, want := range o.files {
		if len(got[path]) != len(want) {
			t.Fatalf("peer-to-peer %s: %s: %d bytes, want %d", p.name(), path, len(got[path]), len(want))
		}
	}
	v, first, last := l.goodput(rl, o.total())
	if v == 0 {
		t.Fatalf("peer-to-peer %s: no 1-RTT data crossed the link", p.name())
	}
	if other := l.rateOthers(rl, first, last); cross && other < crossMinOther {
		t.Fatalf("peer-to-peer %s: the competing flow got %.0f kbps: the figure is not crosstraffic's", p.name(), other)
	}
	t.Logf("peer-to-peer %s %s: %.0f kbps (competing flow %.0f kbps, %d drops at the queue)", p.name(), name, v, l.rateOthers(rl, first, last), l.dropped(toClient))
	refs[key] = v
	return v
}

// checkGoodput: one connection carried the file over the link, at no
// less than a share of the peer-to-peer figure; with cross, beside a
// competing flow that kept a share of the link.
func checkGoodput(name string, cross bool) func(t *testing.T, r *run) {
	return func(t *testing.T, r *run) {
		t.Helper()
		checkConnections(t, r, 1)
		l := r.relay.link.Load()
		got, first, last := l.goodput(r.relay, r.o.total())
		if got == 0 {
			t.Fatal("no 1-RTT data crossed the link")
		}
		other := l.rateOthers(r.relay, first, last)
		ref := reference(t, r.peer, name, cross)
		share := goodputMinShare
		if cross {
			share = crossMinShare
			if other < crossMinOther {
				t.Errorf("the competing flow got %.0f kbps while the file crossed the link: the case tested nothing", other)
			}
		}
		// The figure as the matrix shows it (scripts/interopmatrix).
		t.Logf("figure: %.0f kbps, peer-to-peer %.0f kbps", got, ref)
		t.Logf("%s %s: %.2fx the peer-to-peer figure; competing flow %.0f kbps; %d drops at the queue",
			name, r.role, got/ref, other, l.dropped(toClient))
		if got < share*ref {
			t.Errorf("%s: %.0f kbps, under %.0f%% of %s's own %.0f kbps over the same link", name, got, share*100, r.peer.name(), ref)
		}
	}
}
