package emu

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mptester/mptester/internal/netns"
)

func cpuTime(t testing.TB) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// An idle link, and one waiting a long time for a queued packet, must
// sleep rather than spin.
func TestIdleLinkDoesNotSpin(t *testing.T) {
	tl := startLink(t, 11)
	tl.Set(Up, Params{Delay: 10 * time.Second})
	tl.cli.send(udpPacket(cliAddr, srvAddr, 100, 1))
	waitFor(t, "packet queued", time.Second, func() bool { return tl.Stats().Up.PacketsIn == 1 })
	time.Sleep(20 * time.Millisecond)
	c0, w0 := cpuTime(t), time.Now()
	time.Sleep(400 * time.Millisecond)
	used, wall := cpuTime(t)-c0, time.Since(w0)
	// One spinning thread would use ~100% of wall time.
	if used > wall/20 {
		t.Errorf("idle link used %v CPU in %v", used, wall)
	}
	t.Logf("idle CPU %v in %v", used, wall)
}

// requireRootTUN skips unless we can make TUNs and namespaces; under CI it fails instead.
func requireRootTUN(t testing.TB) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "not root"
	} else if _, err := os.Stat("/dev/net/tun"); err != nil {
		why = "no /dev/net/tun"
	} else if _, err := exec.LookPath("ip"); err != nil {
		why = "no ip command"
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true but cannot run: %s", why)
	}
	t.Skipf("needs root, /dev/net/tun and ip(8): %s", why)
}

func run(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// tunPair is a Link between two real TUNs, each in a fresh namespace.
type tunPair struct {
	*Link
	nsC, nsI     string
	cAddr, iAddr string
}

func setupTUNPair(t testing.TB) *tunPair {
	requireRootTUN(t)
	runtime.GC()
	gc := debug.SetGCPercent(-1) // see startTimedLink
	t.Cleanup(func() { debug.SetGCPercent(gc) })
	var rb [3]byte
	rand.Read(rb[:])
	sfx := hex.EncodeToString(rb[:])
	p := &tunPair{nsC: "emuc-" + sfx, nsI: "emui-" + sfx, cAddr: "198.18.77.2", iAddr: "198.18.77.1"}
	tunC, tunI := "emc"+sfx, "emi"+sfx
	for _, ns := range []string{p.nsC, p.nsI} {
		run(t, "ip", "netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "delete", ns).Run() })
	}
	fc, err := OpenTUN(tunC)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := OpenTUN(tunI)
	if err != nil {
		fc.Close()
		t.Fatal(err)
	}
	p.Link = NewLink("tun", fc, fi, 1)
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background()) }()
	t.Cleanup(func() {
		p.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(3 * time.Second):
			t.Error("Run did not return after Close: TUN reads not interrupted")
		}
	})
	run(t, "ip", "link", "set", tunC, "netns", p.nsC)
	run(t, "ip", "link", "set", tunI, "netns", p.nsI)
	run(t, "ip", "-n", p.nsC, "addr", "add", p.cAddr+"/24", "dev", tunC)
	run(t, "ip", "-n", p.nsI, "addr", "add", p.iAddr+"/24", "dev", tunI)
	for _, x := range [][2]string{{p.nsC, tunC}, {p.nsI, tunI}} {
		run(t, "ip", "-n", x[0], "link", "set", "lo", "up")
		run(t, "ip", "-n", x[0], "link", "set", x[1], "up")
	}
	return p
}

func checkRTT(t *testing.T, what string, rtts []time.Duration, want time.Duration) {
	t.Helper()
	s := slices.Clone(rtts)
	slices.Sort(s)
	m := s[len(s)/2]
	t.Logf("%s RTT median %v min %v max %v (n=%d)", what, m, s[0], s[len(s)-1], len(s))
	if m < want-time.Millisecond || m > want+time.Millisecond {
		t.Errorf("%s RTT median %v, want %v ± 1ms", what, m, want)
	}
}

// BenchmarkTUNBulkTCP: goodput of one bulk TCP flow through real TUNs and
// an unlimited Link with 1 ms delay each way (root; run with -benchtime 1x).
func BenchmarkTUNBulkTCP(b *testing.B) {
	p := setupTUNPair(b)
	p.Set(Up, Params{Delay: time.Millisecond})
	p.Set(Down, Params{Delay: time.Millisecond})
	b.ResetTimer()
	got := bulkGoodput(b, p, 500*time.Millisecond, 2*time.Second)
	b.ReportMetric(got/1e6, "Mbit/s")
	s := p.Stats().Up
	b.ReportMetric(float64(s.Lateness.Median.Nanoseconds())/1e3, "late-p50-µs")
	b.ReportMetric(float64(s.Lateness.P99.Nanoseconds())/1e3, "late-p99-µs")
}

// bulkGoodput sends one TCP flow client -> Internet and returns the
// receiver's goodput in bit/s over dur after warm.
func bulkGoodput(t testing.TB, p *tunPair, warm, dur time.Duration) float64 {
	t.Helper()
	var ln net.Listener
	if err := netns.Do(p.nsI, func() (err error) { ln, err = net.Listen("tcp4", p.iAddr+":0"); return }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var received atomic.Int64
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 1<<16)
		for {
			n, err := c.Read(buf)
			received.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	var conn net.Conn
	if err := netns.Do(p.nsC, func() (err error) { conn, err = net.Dial("tcp4", ln.Addr().String()); return }); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go func() {
		buf := make([]byte, 1<<16)
		for {
			if _, err := conn.Write(buf); err != nil {
				return
			}
		}
	}()
	time.Sleep(warm) // slow start, queue fill
	r0, t0, c0 := received.Load(), time.Now(), cpuTime(t)
	time.Sleep(dur)
	el := time.Since(t0)
	got := float64(received.Load()-r0) * 8 / el.Seconds()
	t.Logf("process CPU %.0f%% of one core (emulator, TCP sender and receiver)", float64(cpuTime(t)-c0)/float64(el)*100)
	return got
}

// Closing a device behind the Link's back ends Run with an error instead
// of hanging the closer.
func TestExternalCloseOfFDDevice(t *testing.T) {
	cdev, _ := newSockPort(t)
	idev, _ := newSockPort(t)
	l := NewLink("x", cdev, idev, 1)
	done := make(chan error, 1)
	go func() { done <- l.Run(context.Background()) }()
	time.Sleep(20 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- cdev.Close() }()
	select {
	case <-closed:
	case <-time.After(2 * time.Second):
		t.Fatal("closing the device hung")
	}
	select {
	case err := <-done:
		if err == nil {
			t.Error("Run returned nil after its device was closed under it")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Run did not return")
	}
}

// The writer threads run SCHED_FIFO when permitted, and only they do.
func TestRealtimeThreadsRoot(t *testing.T) {
	requireRootTUN(t)
	if RealtimePriority == 0 {
		t.Skip("RealtimePriority 0")
	}
	count := func() (fifo int) {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			b, err := os.ReadFile("/proc/self/task/" + e.Name() + "/stat")
			if err != nil {
				continue
			}
			// Field 41 (policy) follows the ")" of the command name.
			f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
			if len(f) > 38 && f[38] == "1" { // SCHED_FIFO
				fifo++
			}
		}
		return fifo
	}
	before := count()
	startLink(t, 14)
	waitFor(t, "2 writer threads at SCHED_FIFO", 2*time.Second, func() bool { return count() == before+2 })
}
