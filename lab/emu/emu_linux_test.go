package emu

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

func cpuTime(t *testing.T) time.Duration {
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
	tl.cli.in <- udpPacket(cliAddr, srvAddr, 100, 1)
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
func requireRootTUN(t *testing.T) {
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

func run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// inNetns runs fn on a thread inside network namespace ns; sockets fn
// creates stay in ns.
func inNetns(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked if restoring fails: the thread then dies with us
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		target, err := os.Open("/run/netns/" + ns)
		if err != nil {
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		err = fn()
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// TestTUNPingRoot runs a Link between two real TUNs in a fresh namespace
// pair and checks ICMP and TCP-connect RTT through it: 2*D ± 1 ms.
func TestTUNPingRoot(t *testing.T) {
	requireRootTUN(t)
	var rb [3]byte
	rand.Read(rb[:])
	sfx := hex.EncodeToString(rb[:])
	nsC, nsI := "emuc-"+sfx, "emui-"+sfx
	tunC, tunI := "emc"+sfx, "emi"+sfx
	for _, ns := range []string{nsC, nsI} {
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
	const cAddr, iAddr = "198.18.77.2", "198.18.77.1"
	run(t, "ip", "link", "set", tunC, "netns", nsC)
	run(t, "ip", "link", "set", tunI, "netns", nsI)
	run(t, "ip", "-n", nsC, "addr", "add", cAddr+"/24", "dev", tunC)
	run(t, "ip", "-n", nsI, "addr", "add", iAddr+"/24", "dev", tunI)
	for _, x := range [][2]string{{nsC, tunC}, {nsI, tunI}} {
		run(t, "ip", "-n", x[0], "link", "set", "lo", "up")
		run(t, "ip", "-n", x[0], "link", "set", x[1], "up")
	}

	const D = 5 * time.Millisecond
	l := NewLink("tun", fc, fi, 1)
	l.Set(Up, Params{Delay: D})
	l.Set(Down, Params{Delay: D})
	done := make(chan error, 1)
	go func() { done <- l.Run(context.Background()) }()
	defer func() {
		l.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(3 * time.Second):
			t.Error("Run did not return after Close: TUN reads not interrupted")
		}
	}()

	// ICMP echo from the client namespace.
	var pc *icmp.PacketConn
	if err := inNetns(nsC, func() (err error) { pc, err = icmp.ListenPacket("ip4:icmp", cAddr); return }); err != nil {
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
	if err := inNetns(nsI, func() (err error) { ln, err = net.Listen("tcp4", iAddr+":0"); return }); err != nil {
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
		err := inNetns(nsC, func() error {
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
