package mpquic

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestECNVerdict: RFC 9000 §13.4.2.1's validation of one ACK frame.
func TestECNVerdict(t *testing.T) {
	c := func(ect0, ect1, ce uint64) *ECNCounts { return &ECNCounts{ECT0: ect0, ECT1: ect1, CE: ce} }
	for _, tc := range []struct {
		name     string
		prev     ECNCounts
		got      *ECNCounts
		newlyECT int
		sent     uint64
		want     ECNState
		ce       uint64
	}{
		{"counts match", ECNCounts{}, c(5, 0, 0), 5, 5, ECNValidated, 0},
		{"more counted than acked (ACK-only packets are marked too)", ECNCounts{}, c(7, 0, 0), 5, 9, ECNValidated, 0},
		{"CE counts as marked", *c(5, 0, 0), c(7, 0, 3), 5, 12, ECNValidated, 3},
		{"all CE", ECNCounts{}, c(0, 0, 4), 4, 4, ECNValidated, 4},
		{"no counts for marked packets: bleached", ECNCounts{}, nil, 3, 3, ECNBleached, 0},
		{"counts did not move: bleached", *c(5, 0, 0), c(5, 0, 0), 3, 8, ECNBleached, 0},
		{"fewer than acked: mangled", ECNCounts{}, c(2, 0, 0), 5, 5, ECNMangled, 0},
		{"ECT(1) we never send: mangled", ECNCounts{}, c(5, 1, 0), 5, 5, ECNMangled, 0},
		{"more than sent marked: mangled", ECNCounts{}, c(6, 0, 0), 5, 5, ECNMangled, 0},
		{"count went down: mangled", *c(5, 0, 2), c(6, 0, 1), 1, 9, ECNMangled, 0},
		{"nothing marked newly acked: no verdict", *c(5, 0, 0), c(5, 0, 0), 0, 5, ECNTesting, 0},
		{"no counts, nothing marked acked: no verdict", ECNCounts{}, nil, 0, 0, ECNTesting, 0},
		{"CE without marked packets acked", *c(5, 0, 0), c(5, 0, 1), 0, 6, ECNTesting, 1},
	} {
		got, ce := ecnVerdict(tc.prev, tc.got, tc.newlyECT, tc.sent)
		if got != tc.want || ce != tc.ce {
			t.Errorf("%s: %v, CE +%d; want %v, +%d", tc.name, got, ce, tc.want, tc.ce)
		}
	}
}

// TestECNTestingPackets: a path marks its first ten packets, then waits
// for a verdict; all ten lost fails validation; validated keeps marking.
func TestECNTestingPackets(t *testing.T) {
	e := pathECN{capable: true}
	for i := range ecnTestPackets {
		if e.out = e.mark(); e.out != ecnECT0 {
			t.Fatalf("packet %d not marked", i)
		}
		e.onSent()
	}
	if e.state != ECNTesting || e.mark() != ecnNotECT {
		t.Fatalf("after %d test packets: %v, mark %d; want testing, not marking", ecnTestPackets, e.state, e.mark())
	}
	for range ecnTestPackets - 1 {
		e.onLost()
	}
	if e.state != ECNTesting {
		t.Fatalf("9 of 10 lost: %v", e.state)
	}
	e.onLost()
	if e.state != ECNMangled || e.mark() != ecnNotECT {
		t.Fatalf("all 10 lost: %v, mark %d", e.state, e.mark())
	}
	v := pathECN{capable: true, state: ECNValidated, testSent: 50}
	if v.mark() != ecnECT0 {
		t.Fatal("a validated path does not mark")
	}
	if (&pathECN{}).mark() != ecnNotECT {
		t.Fatal("a socket without ECN marks")
	}
}

// TestECNLoopback: over real UDP sockets on loopback (which keep the ECN
// field), every path of a two-path connection validates ECN both ways,
// and a client with DisableECN stays not-tried while still reporting the
// server's marks, which validate the server's paths.
func TestECNLoopback(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("ECN is read and marked on Linux only (ecn_other.go)")
	}
	for _, disable := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		mp := newMPPair(t, ctx, udpLoopback(t), nil, &Config{DisableECN: disable})
		if _, err := mp.c.AddPath(ctx, udpLoopback(t), mp.l.Addr()); err != nil {
			t.Fatal(err)
		}
		exchange(t, ctx, mp.open, testData(1<<20, 3))
		want := ECNValidated
		if disable {
			want = ECNNotTried
		}
		for _, st := range mp.c.PathStats() {
			t.Logf("disable %v client %v", disable, st)
			if st.ECN != want || st.ECNCE != 0 || st.ECNCEReceived != 0 {
				t.Errorf("DisableECN %v: client path %d: ecn %v ce %d/%d, want %v and no CE", disable, st.ID, st.ECN, st.ECNCE, st.ECNCEReceived, want)
			}
		}
		srv := mp.server(t)
		sts := srv.PathStats()
		if len(sts) != 2 {
			t.Errorf("server has %d paths, want 2", len(sts))
		}
		for _, st := range sts {
			t.Logf("disable %v server %v", disable, st)
			if st.ECN != ECNValidated {
				t.Errorf("DisableECN %v: server path %d: ecn %v, want validated", disable, st.ID, st.ECN)
			}
		}
		mp.c.CloseWithError(0, "")
		cancel()
	}
}

// TestECNCEReducesTheWindow: the server's receive path marks every ECT(0)
// packet CE (a router marking as hard as it can); the client's path learns
// the marks from the server's ACK_ECN counts and takes them as congestion
// (RFC 9002 §7.1, B.7): its window falls to the minimum of two packets,
// every reduction a CE one (loopback loses nothing), and at most one per
// round trip: each CE increase the client saw reduced its window exactly
// when the largest packet it newly acknowledged was sent after the last
// reduction (a packet that made a round trip since), whatever the number
// of packets a round trip carried. (Before, at most one reduction per two
// marks: a round trip carries two packets at the minimum window, except
// when a loaded host left the sender a packet short, as in 1508
// reductions for 2988 marks at load 19.)
func TestECNCEReducesTheWindow(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("ECN is read and marked on Linux only (ecn_other.go)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mp := newMPPair(t, ctx, udpLoopback(t), nil, &Config{DisableMultipath: true})
	exchange(t, ctx, mp.open, []byte("hello")) // the server's connection exists
	type ceAck struct {
		sent, at time.Time
		reduced  bool
	}
	var mu sync.Mutex
	var acks []ceAck
	mp.c.mu.Lock()
	mp.c.testCE = func(sent, now time.Time, reduced bool) {
		mu.Lock()
		acks = append(acks, ceAck{sent, now, reduced})
		mu.Unlock()
	}
	mp.c.mu.Unlock()
	srv := mp.server(t)
	srv.mu.Lock()
	srv.testECN = func(cp byte) byte {
		if cp == ecnECT0 {
			return ecnCE
		}
		return cp
	}
	srv.mu.Unlock()
	exchange(t, ctx, mp.open, testData(4<<20, 4))
	st := pathStat(t, mp.c, 0)
	mu.Lock()
	defer mu.Unlock()
	var last time.Time
	var reduced, kept, wrong int
	for _, a := range acks {
		afterLast := a.sent.After(last)
		// A loss is a reduction this hook does not see, and persistent
		// congestion ends the recovery period: the rule is checked
		// where CE was the only signal.
		if a.reduced != afterLast && st.PacketsLost == 0 {
			if wrong++; wrong <= 3 {
				when := "before any reduction"
				if !last.IsZero() {
					when = fmt.Sprintf("%v after the last reduction", a.sent.Sub(last))
				}
				t.Errorf("CE acknowledging a packet sent %s: reduced %v, want %v", when, a.reduced, afterLast)
			}
		}
		if a.reduced {
			reduced++
			last = a.at
		} else {
			kept++
		}
	}
	t.Logf("client %v: CE %d, reductions %d (CE %d), lost %d; CE increases: %d reduced, %d within a round trip of a reduction, %d against the rule", st, st.ECNCE, st.CongestionEvents, st.ECNCEEvents, st.PacketsLost, reduced, kept, wrong)
	if st.ECN != ECNValidated || st.ECNCE < 100 {
		t.Fatalf("ecn %v, %d CE reported: want validated and the server's marks", st.ECN, st.ECNCE)
	}
	if st.ECNCEEvents == 0 || st.ECNCEEvents > st.CongestionEvents || uint64(reduced) != st.ECNCEEvents {
		t.Errorf("%d CE reductions of %d congestion events, %d seen: want CE reductions, counted among the events", st.ECNCEEvents, st.CongestionEvents, reduced)
	}
	if st.CongestionWindow > 2*st.MaxDatagramSize {
		t.Errorf("window %d after %d CE reductions: want the minimum, %d", st.CongestionWindow, st.ECNCEEvents, 2*st.MaxDatagramSize)
	}
}

// TestQlogECNState: each side's trace shows each path's ECN validation
// (recovery:ecn_state_updated): testing with its first marked packet,
// then capable once the peer's counts matched.
func TestQlogECNState(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("ECN is read and marked on Linux only (ecn_other.go)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sink := &qlogSink{traces: map[bool]*bytes.Buffer{}, closed: map[bool]bool{}}
	conf := &Config{Qlog: sink.open}
	mp := newMPPair(t, ctx, udpLoopback(t), conf, conf)
	if _, err := mp.c.AddPath(ctx, udpLoopback(t), mp.l.Addr()); err != nil {
		t.Fatal(err)
	}
	exchange(t, ctx, mp.open, testData(256<<10, 7))
	srv := mp.server(t)
	mp.c.CloseWithError(0, "")
	for _, c := range []*Conn{mp.c, srv} {
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("connection did not end")
		}
	}
	for _, isClient := range []bool{true, false} {
		sink.mu.Lock()
		_, evs := parseQlog(t, sink.traces[isClient].Bytes())
		sink.mu.Unlock()
		states := map[uint32][]string{}
		for _, e := range evs {
			if e.Name == "recovery:ecn_state_updated" {
				states[*e.Data.PathID] = append(states[*e.Data.PathID], e.Data.New)
			}
		}
		for _, id := range []uint32{0, 1} {
			if got := strings.Join(states[id], ","); got != "testing,capable" {
				t.Errorf("client %v path %d: ECN states %q, want testing,capable", isClient, id, got)
			}
		}
	}
}

// TestECNFamilies: ECN validates over IPv6 (IPV6_TCLASS) and through a
// dual-stack listener reached over IPv4, whose replies go to a mapped
// address (IP_TOS on an IPv6 socket), with the codepoint read on both.
func TestECNFamilies(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("ECN is read and marked on Linux only (ecn_other.go)")
	}
	for _, tc := range []struct{ listen, client, dial string }{
		{"[::1]:0", "[::1]:0", "[::1]"},
		{"[::]:0", "127.0.0.1:0", "127.0.0.1"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		stls, ctls := testTLS(t)
		l, err := ListenAddr(tc.listen, stls, nil)
		if err != nil {
			t.Skipf("%s: %v", tc.listen, err)
		}
		accepted := make(chan *Conn, 1)
		go serveEach(ctx, func(ctx context.Context) (*Conn, error) {
			c, err := l.Accept(ctx)
			if err == nil {
				select {
				case accepted <- c:
				default:
				}
			}
			return c, err
		}, (*Conn).AcceptStream, func(s *Stream) {
			io.Copy(s, s)
			s.Close()
		})
		pc, err := net.ListenPacket("udp", tc.client)
		if err != nil {
			t.Skipf("%s: %v", tc.client, err)
		}
		_, port, _ := net.SplitHostPort(l.Addr().String())
		raddr, _ := net.ResolveUDPAddr("udp", net.JoinHostPort(strings.Trim(tc.dial, "[]"), port))
		c, err := Dial(ctx, pc, raddr, ctls, nil)
		if err != nil {
			t.Fatalf("%s -> %s: %v", tc.client, tc.listen, err)
		}
		exchange(t, ctx, func(ctx context.Context) (io.ReadWriteCloser, error) { return c.OpenStream(ctx) }, testData(256<<10, 8))
		st := pathStat(t, c, 0)
		if st.ECN != ECNValidated {
			t.Errorf("%s -> %s: client ecn %v, want validated", tc.client, tc.listen, st.ECN)
		}
		if s := pathStat(t, <-accepted, 0); s.ECN != ECNValidated {
			t.Errorf("%s -> %s: server ecn %v, want validated", tc.client, tc.listen, s.ECN)
		}
		c.CloseWithError(0, "")
		pc.Close()
		l.Close()
		cancel()
	}
}
