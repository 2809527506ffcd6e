//go:build linux && !race

// Timing-accuracy tests through real TUNs: built without the race
// detector, which slows the emulator 5-10x (they run in the race-free CI
// pass).

package emu

import (
	"net"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"

	"github.com/mptester/mptester/internal/netns"
)

// TestTUNPingRoot runs a Link between two real TUNs in a fresh namespace
// pair and checks ICMP and TCP-connect RTT through it: 2*D ± 1 ms.
// ci:rerun-allowed: the emulator's own delivery times through real TUN devices; a host stall on the shared vCPUs delays a delivery past the tolerance
func TestTUNPingRoot(t *testing.T) {
	p := setupTUNPair(t)
	l, nsC, nsI, cAddr, iAddr := p.Link, p.nsC, p.nsI, p.cAddr, p.iAddr
	const D = 5 * time.Millisecond
	l.Set(Up, Params{Delay: D})
	l.Set(Down, Params{Delay: D})

	// ICMP echo from the client namespace.
	var pc *icmp.PacketConn
	if err := netns.Do(nsC, func() (err error) { pc, err = icmp.ListenPacket("ip4:icmp", cAddr); return }); err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var rtts []time.Duration
	buf := make([]byte, 1500)
	for seq := range 20 {
		msg := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: 0x4d54, Seq: seq, Data: []byte("mptester emu")}}
		wb, _ := msg.Marshal(nil)
		t0 := time.Now()
		if _, err := pc.WriteTo(wb, &net.IPAddr{IP: net.ParseIP(iAddr)}); err != nil {
			t.Fatal(err)
		}
		pc.SetReadDeadline(time.Now().Add(time.Second))
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				t.Fatalf("echo %d: %v", seq, err)
			}
			m, err := icmp.ParseMessage(1, buf[:n])
			if e, ok := m.Body.(*icmp.Echo); err == nil && m.Type == ipv4.ICMPTypeEchoReply && ok && e.Seq == seq {
				break
			}
		}
		rtts = append(rtts, time.Since(t0))
		time.Sleep(5 * time.Millisecond)
	}
	checkRTT(t, "ICMP", rtts, 2*D)

	// TCP connect RTT: listener in the Internet namespace.
	var ln net.Listener
	if err := netns.Do(nsI, func() (err error) { ln, err = net.Listen("tcp4", iAddr+":0"); return }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	rtts = rtts[:0]
	for range 15 {
		err := netns.Do(nsC, func() error {
			t0 := time.Now()
			c, err := net.DialTimeout("tcp4", ln.Addr().String(), time.Second)
			if err != nil {
				return err
			}
			rtts = append(rtts, time.Since(t0))
			return c.Close()
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	checkRTT(t, "TCP connect", rtts, 2*D)
	s := l.Stats()
	t.Logf("lateness up %+v down %+v", s.Up.Lateness, s.Down.Lateness)
}

// TestTUNBulkRateRoot: a bulk TCP transfer through a 100 Mbit/s, 5 ms
// path gets at least 90% of the rate as goodput (headers are ~3.5%).
// ci:rerun-allowed: the emulator's own delivery times through real TUN devices; a host stall on the shared vCPUs delays a delivery past the tolerance
func TestTUNBulkRateRoot(t *testing.T) {
	if testing.Short() {
		t.Skip("3 s bulk transfer")
	}
	p := setupTUNPair(t)
	const rate = 100_000_000
	p.Set(Up, Params{Delay: 5 * time.Millisecond, RateBps: rate})
	p.Set(Down, Params{Delay: 5 * time.Millisecond, RateBps: rate})
	got := bulkGoodput(t, p, time.Second, 2*time.Second)
	s := p.Stats().Up
	t.Logf("goodput %.1f Mbit/s of %d; up delivered %d pkts, tail drops %d, lateness %+v", got/1e6, rate/1000000, s.Delivered, s.DropQueue, s.Lateness)
	if got < 0.9*rate {
		t.Errorf("goodput %.1f Mbit/s, want >= 90%% of %d Mbit/s", got/1e6, rate/1000000)
	}
}
