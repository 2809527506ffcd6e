package emu

import (
	"context"
	"math"
	"net/netip"
	"runtime"
	"testing"
	"time"
)

// owd returns the one-way delays of received frames by their seq.
func owd(t *testing.T, sentAt []time.Time, got []frame) []time.Duration {
	t.Helper()
	var ds []time.Duration
	for _, f := range got {
		s := pktSeq(f.b)
		if s >= uint64(len(sentAt)) {
			t.Fatalf("unexpected seq %d", s)
		}
		ds = append(ds, f.t.Sub(sentAt[s]))
	}
	return ds
}

// binomialOK: observed count k of n trials within 4 sigma of p.
func binomialOK(k, n int, p float64) (bool, float64) {
	sd := math.Sqrt(float64(n) * p * (1 - p))
	return math.Abs(float64(k)-float64(n)*p) <= 4*sd, sd
}

func TestLossRate(t *testing.T) {
	for _, loss := range []float64{0.05, 0.3} {
		tl := startLink(t, 3)
		tl.Set(Up, Params{Loss: loss})
		const n = 20000
		for i := range n {
			tl.cli.send(udpPacket(cliAddr, srvAddr, 60, uint64(i)))
		}
		waitFor(t, "all packets handled", 10*time.Second, func() bool {
			s := tl.Stats().Up
			return s.Delivered+s.DropLoss == n
		})
		got := drainNow(tl.inet)
		lost := n - len(got)
		if ok, sd := binomialOK(lost, n, loss); !ok {
			t.Errorf("loss %g: lost %d of %d, want %.0f ± %.0f (4 sigma)", loss, lost, n, n*loss, 4*sd)
		}
		if s := tl.Stats().Up; s.DropLoss != uint64(lost) {
			t.Errorf("stats DropLoss %d, observed %d", s.DropLoss, lost)
		}
		tl.Close()
	}
}

func TestGilbertElliottBursts(t *testing.T) {
	const n = 30000
	ge := &GilbertElliott{P: 0.05, R: 0.25, LossGood: 0, LossBad: 1}
	run := func(p Params) (rate, meanBurst float64) {
		tl := startLink(t, 4)
		tl.Set(Up, p)
		for i := range n {
			tl.cli.send(udpPacket(cliAddr, srvAddr, 60, uint64(i)))
		}
		waitFor(t, "all packets handled", 10*time.Second, func() bool {
			s := tl.Stats().Up
			return s.Delivered+s.DropLoss == n
		})
		recv := make([]bool, n)
		for _, f := range drainNow(tl.inet) {
			recv[pktSeq(f.b)] = true
		}
		lost, bursts := 0, 0
		for i := range n {
			if !recv[i] {
				lost++
				if i == 0 || recv[i-1] {
					bursts++
				}
			}
		}
		return float64(lost) / n, float64(lost) / float64(bursts)
	}
	rate, burst := run(Params{GE: ge})
	// Stationary loss P/(P+R) = 1/6; mean burst 1/R = 4. With ~830 bursts
	// the standard error of the mean burst is ~0.12: allow ±0.6.
	if math.Abs(rate-ge.LossRate()) > 0.02 {
		t.Errorf("GE loss rate %.4f, want %.4f ± 0.02", rate, ge.LossRate())
	}
	if math.Abs(burst-1/ge.R) > 0.6 {
		t.Errorf("GE mean burst %.2f, want %.2f ± 0.6", burst, 1/ge.R)
	}
	// The same loss rate without bursts: mean burst 1/(1-p) = 1.2.
	_, iburst := run(Params{Loss: ge.LossRate()})
	if iburst > 1.5 {
		t.Errorf("independent loss mean burst %.2f, want ~1.2", iburst)
	}
	t.Logf("GE rate %.4f burst %.2f; independent burst %.2f", rate, burst, iburst)
}

func TestRateTailDrop(t *testing.T) {
	tl := startLink(t, 6)
	tl.Set(Up, Params{RateBps: 1_200_000, QueueBytes: 15000}) // 10 ms per 1500 B packet
	const n = 100
	for i := range n {
		tl.cli.send(udpPacket(cliAddr, srvAddr, 1500, uint64(i)))
	}
	waitFor(t, "all packets handled", 5*time.Second, func() bool {
		s := tl.Stats().Up
		return s.Delivered+s.DropQueue == n
	})
	got := drainNow(tl.inet)
	s := tl.Stats().Up
	// The burst arrives within a few ms: the queue admits 15000/1500 = 10
	// packets (one more per 10 ms the burst takes to arrive).
	if len(got) < 10 || len(got) > 12 {
		t.Errorf("delivered %d of a %d-packet burst, want 10..12 with a 15000-byte queue", len(got), n)
	}
	if int(s.DropQueue)+len(got) != n {
		t.Errorf("DropQueue %d + delivered %d != %d", s.DropQueue, len(got), n)
	}
	for i, f := range got {
		if pktSeq(f.b) != uint64(i) {
			t.Errorf("tail drop must keep the head: position %d holds seq %d", i, pktSeq(f.b))
		}
	}
}

func TestDownUp(t *testing.T) {
	tl := startLink(t, 7)
	tl.SetDown(true)
	if !tl.Down() {
		t.Fatal("Down() false after SetDown(true)")
	}
	for i := range 10 {
		tl.cli.send(udpPacket(cliAddr, srvAddr, 100, uint64(i)))
		tl.inet.send(udpPacket(srvAddr, cliAddr, 100, uint64(i)))
	}
	waitFor(t, "drops", 2*time.Second, func() bool {
		s := tl.Stats()
		return s.Up.DropDown == 10 && s.Down.DropDown == 10
	})
	tl.SetDown(false)
	tl.cli.send(udpPacket(cliAddr, srvAddr, 100, 99))
	if got := collect(tl.inet, 1, 2*time.Second); len(got) != 1 || pktSeq(got[0].b) != 99 {
		t.Fatalf("after up: got %d packets", len(got))
	}
	// Packets in flight when the link goes down are lost too.
	tl.Set(Up, Params{Delay: 100 * time.Millisecond})
	for i := range 5 {
		tl.cli.send(udpPacket(cliAddr, srvAddr, 100, uint64(i)))
	}
	waitFor(t, "queued", time.Second, func() bool { return tl.Stats().Up.PacketsIn == 16 })
	tl.SetDown(true)
	time.Sleep(150 * time.Millisecond)
	if got := drain(tl.inet, 10*time.Millisecond); len(got) != 0 {
		t.Errorf("%d in-flight packets delivered after down", len(got))
	}
	if s := tl.Stats().Up; s.DropDown != 15 {
		t.Errorf("DropDown %d, want 15", s.DropDown)
	}
}

func TestBlock(t *testing.T) {
	tl := startLink(t, 8)
	tl.Block(netip.MustParsePrefix("198.19.128.0/17"))
	tl.Block(netip.MustParsePrefix("fd00:fe::7/128"))
	cases := []struct {
		dir     Direction
		src     netip.Addr
		dst     netip.Addr
		blocked bool
	}{
		{Up, cliAddr, netip.MustParseAddr("198.19.128.1"), true},
		{Up, cliAddr, netip.MustParseAddr("198.19.255.255"), true},
		{Up, cliAddr, netip.MustParseAddr("198.19.0.1"), false},
		{Down, netip.MustParseAddr("198.19.200.3"), cliAddr, true},
		{Down, netip.MustParseAddr("198.19.1.3"), cliAddr, false},
		{Up, cli6, netip.MustParseAddr("fd00:fe::7"), true},
		{Up, cli6, netip.MustParseAddr("fd00:fe::8"), false},
		{Down, netip.MustParseAddr("fd00:fe::7"), cli6, true},
		// Down packets are matched by source, Up by destination.
		{Down, cliAddr, netip.MustParseAddr("198.19.128.1"), false},
	}
	for i, c := range cases {
		in, out := tl.devs(c.dir)
		before := tl.Stats().Dir(c.dir).DropBlock
		in.send(udpPacket(c.src, c.dst, 80, uint64(i)))
		if c.blocked {
			waitFor(t, "block drop", time.Second, func() bool { return tl.Stats().Dir(c.dir).DropBlock == before+1 })
		} else if got := collect(out, 1, time.Second); len(got) != 1 {
			t.Errorf("case %d %v %v->%v: not delivered", i, c.dir, c.src, c.dst)
		}
	}
	if !tl.Blocked(netip.MustParseAddr("198.19.130.0")) || tl.Blocked(netip.MustParseAddr("198.19.1.0")) {
		t.Error("Blocked() disagrees with Block")
	}
	tl.Unblock(netip.MustParsePrefix("198.19.128.0/17"))
	tl.cli.send(udpPacket(cliAddr, netip.MustParseAddr("198.19.128.1"), 80, 1))
	if got := collect(tl.inet, 1, time.Second); len(got) != 1 {
		t.Error("not delivered after Unblock")
	}
}

func TestInvalidPacketsDropped(t *testing.T) {
	tl := startLink(t, 10)
	tl.cli.send([]byte{0x45, 0, 0})    // truncated IPv4
	tl.cli.send([]byte{0x10, 1, 2, 3}) // not IP
	waitFor(t, "invalid drops", time.Second, func() bool { return tl.Stats().Up.DropInvalid == 2 })
}

func TestSetParamsCopies(t *testing.T) {
	l := NewLink("x", newMemDev(), newMemDev(), 1)
	defer l.Close()
	ge := &GilbertElliott{P: 0.1, R: 0.5, LossBad: 1}
	l.Set(Down, Params{Delay: time.Second, Loss: 7, GE: ge, Jitter: -1})
	ge.P = 0.9
	p := l.Params(Down)
	if p.GE.P != 0.1 || p.Loss != 1 || p.Jitter != 0 || p.Delay != time.Second {
		t.Errorf("Params = %+v (GE %+v)", p, *p.GE)
	}
	if l.Params(Up) != (Params{}) {
		t.Errorf("Up params changed: %+v", l.Params(Up))
	}
}

func TestRunStopsOnCancelAndClose(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cli, inet := newMemDev(), newMemDev()
	l := NewLink("x", cli, inet, 1)
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after cancel: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	select {
	case <-cli.closed:
	default:
		t.Error("Run did not close the client device")
	}
	if err := l.Run(context.Background()); err == nil {
		t.Error("second Run succeeded")
	}
	// Close before Run: Run refuses, nothing leaks.
	l2 := NewLink("y", newMemDev(), newMemDev(), 1)
	l2.Close()
	if err := l2.Run(context.Background()); err == nil {
		t.Error("Run after Close succeeded")
	}
}

// failDev fails reads with a non-close error.
type failDev struct{ *memDev }

func (failDev) Read([]byte) (int, error) { return 0, errTestDevice }

var errTestDevice = &testErr{}

type testErr struct{}

func (*testErr) Error() string { return "device gone" }

func TestRunReturnsDeviceError(t *testing.T) {
	l := NewLink("x", failDev{newMemDev()}, newMemDev(), 1)
	err := l.Run(context.Background())
	if err == nil || err.Error() != "link x: device gone" {
		t.Errorf("Run = %v, want the device error", err)
	}
}

func TestDefaultQueueBytes(t *testing.T) {
	cases := []struct {
		p    Params
		want int
	}{
		{Params{}, 0},
		{Params{RateBps: 1e6}, 64 << 10},
		{Params{RateBps: 100e6}, 1_250_000},
		{Params{RateBps: 100e6, Delay: 100 * time.Millisecond}, 2_500_000},
		{Params{RateBps: 1e12, Delay: time.Hour}, 64 << 20},
	}
	for _, c := range cases {
		if got := DefaultQueueBytes(c.p); got != c.want {
			t.Errorf("DefaultQueueBytes(%v) = %d, want %d", c.p, got, c.want)
		}
	}
}

func TestReserveProcs(t *testing.T) {
	if !ReserveProcs {
		t.Skip("ReserveProcs off")
	}
	base := runtime.GOMAXPROCS(0)
	tl := startLink(t, 12)
	waitFor(t, "GOMAXPROCS raised", time.Second, func() bool { return runtime.GOMAXPROCS(0) == base+4 })
	tl.Close()
	select {
	case err := <-tl.done:
		tl.done <- err // for the cleanup
	case <-time.After(2 * time.Second):
		t.Fatal("Run did not return")
	}
	if got := runtime.GOMAXPROCS(0); got != base {
		t.Errorf("GOMAXPROCS %d after the link stopped, want %d", got, base)
	}
}

// A path-MTU black hole drops what is longer than the MTU both ways,
// silently, and delivers what fits.
func TestMTUBlackHole(t *testing.T) {
	tl := startLink(t, 12)
	tl.SetMTU(1280)
	if tl.MTU() != 1280 {
		t.Fatalf("MTU() = %d, want 1280", tl.MTU())
	}
	for i, c := range []struct {
		dir  Direction
		src  netip.Addr
		dst  netip.Addr
		size int
		drop bool
	}{
		{Up, cliAddr, srvAddr, 1280, false},
		{Up, cliAddr, srvAddr, 1281, true},
		{Down, srvAddr, cliAddr, 1500, true},
		{Down, srvAddr, cliAddr, 1200, false},
		{Up, cli6, netip.MustParseAddr("fd00:ff::1"), 1281, true},
	} {
		in, out := tl.devs(c.dir)
		before := tl.Stats().Dir(c.dir).DropMTU
		in.send(udpPacket(c.src, c.dst, c.size, uint64(i)))
		if c.drop {
			waitFor(t, "mtu drop", time.Second, func() bool { return tl.Stats().Dir(c.dir).DropMTU == before+1 })
			if got := collect(out, 1, 50*time.Millisecond); len(got) != 0 {
				t.Errorf("case %d: %d bytes delivered past MTU 1280", i, c.size)
			}
		} else if got := collect(out, 1, time.Second); len(got) != 1 {
			t.Errorf("case %d: %d bytes not delivered under MTU 1280", i, c.size)
		}
	}
	tl.SetMTU(0)
	tl.cli.send(udpPacket(cliAddr, srvAddr, 1500, 99))
	if got := collect(tl.inet, 1, time.Second); len(got) != 1 {
		t.Error("not delivered after SetMTU(0)")
	}
}
