package lab_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/emu"
	"github.com/mptester/mptester/lab/labtest"
	"github.com/mptester/mptester/lab/world"
	"github.com/mptester/mptester/probe"
)

// Tests of this file run the lab for real (root, namespaces, TUN). Those
// that measure time are in lab_timing_linux_test.go (not under -race).

func TestLabTopology(t *testing.T) {
	l := labtest.Start(t, lab.Options{Domains: 20})
	info := l.Config()
	if l.InClient(t) {
		paths := l.Paths(t)
		for _, name := range lab.PathNames {
			plan, _ := info.Plan(name)
			p, err := probe.FindPath(paths, name)
			if err != nil {
				t.Fatalf("client has no %s: %v", name, err)
			}
			if !p.Up || !p.HasAddr(plan.Client4) || !p.HasAddr(plan.Client6) {
				t.Errorf("%s: up=%v addrs=%v, want up with %s and %s", name, p.Up, p.Addrs, plan.Client4, plan.Client6)
			}
			var dnsAddrs []netip.Addr
			for _, d := range p.DNS {
				dnsAddrs = append(dnsAddrs, d.Addr.Addr())
			}
			if !slices.Contains(dnsAddrs, plan.Resolv4) || !slices.Contains(dnsAddrs, plan.Resolv6) {
				t.Errorf("%s: DNS %v, want the lab's resolvers %s, %s (from config.yaml)", name, p.DNS, plan.Resolv4, plan.Resolv6)
			}
		}
		return
	}
	ctx := context.Background()
	mustContain := func(side string, argv []string, want ...string) {
		t.Helper()
		out, err := l.Exec(ctx, side, argv...)
		if err != nil {
			t.Fatalf("%v: %v: %s", argv, err, out)
		}
		for _, w := range want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%v: output lacks %q:\n%s", argv, w, out)
			}
		}
	}
	mustContain("client", []string{"ip", "route"},
		"default via 198.18.1.1 dev wlan0 metric 100", "default via 198.18.2.1 dev wwan0 metric 200")
	mustContain("client", []string{"ip", "-6", "route"},
		"default via fd00:1::1 dev wlan0 metric 100", "default via fd00:2::1 dev wwan0 metric 200")
	mustContain("client", []string{"ip", "rule"}, "from 198.18.1.2 lookup 101", "from 198.18.2.2 lookup 102")
	mustContain("client", []string{"ip", "-6", "rule"}, "from fd00:1::2 lookup 101", "from fd00:2::2 lookup 102")
	mustContain("client", []string{"ip", "route", "show", "table", "102"}, "default via 198.18.2.1 dev wwan0")
	mustContain("client", []string{"ip", "mptcp", "endpoint"}, "198.18.2.2 id", "subflow dev wwan0", "fd00:2::2")
	mustContain("client", []string{"ip", "mptcp", "limits"}, "subflows 2")
	mustContain("server", []string{"ip", "mptcp", "limits"}, "subflows 2")
	mustContain("server", []string{"ip", "route", "show", "table", "local"},
		"local 198.19.0.0/17 dev lo", "local 198.19.128.0/17 dev lo")
	mustContain("server", []string{"ip", "-6", "route", "show", "table", "local"}, "local fd00:ff::/64 dev lo", "local fd00:fe::/64 dev lo")
	mustContain("server", []string{"ip", "addr", "show", "dev", "lo"}, "198.18.100.1/32", "198.18.100.2/32", "198.18.200.1/32", "fd00:100::1/128", "fd00:200::1/128")
	if s := l.Status(t); len(s.Paths) != 2 || s.Paths[0].Name != "wlan0" || s.Paths[1].Name != "wwan0" {
		t.Errorf("status paths = %+v", s.Paths)
	}
}

func TestLabCellBackupEndpoint(t *testing.T) {
	l := labtest.Start(t, lab.Options{Domains: 0, CellBackup: true})
	out, err := l.Exec(context.Background(), "client", "ip", "mptcp", "endpoint")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(string(out), "subflow backup dev wwan0") {
		t.Errorf("--cell-backup: endpoints lack 'subflow backup dev wwan0':\n%s", out)
	}
}

// pingOnce reports whether one echo to addr through dev is answered
// within wait.
func pingOnce(t *testing.T, l *labtest.Lab, dev string, addr netip.Addr, wait time.Duration) bool {
	t.Helper()
	out, err := l.Exec(context.Background(), "client", "ping", "-n", "-c", "2", "-i", "0.2",
		"-W", strconv.Itoa(int(wait.Seconds()+0.5)), "-I", dev, addr.String())
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("ping: %v: %s", err, out)
	}
	return strings.Contains(string(out), "bytes from")
}

func TestLabUnreachableTargets(t *testing.T) {
	requirePing(t)
	l := labtest.Start(t, lab.Options{Domains: 300, WorldSeed: 3})
	var tr world.Truth
	l.Truth(t, &tr)
	checked := 0
	for _, path := range lab.PathNames {
		other := "wwan0"
		if path == "wwan0" {
			other = "wlan0"
		}
		for _, a := range tr.Unreachable[path] {
			if slices.Contains(tr.Unreachable[other], a) || !a.Is4() {
				continue // dead everywhere; or IPv6 (checked by TCP below)
			}
			if pingOnce(t, l, path, a, time.Second) {
				t.Errorf("%s is planted unreachable from %s but answered there", a, path)
			}
			if !pingOnce(t, l, other, a, time.Second) {
				t.Errorf("%s is reachable from %s but did not answer there", a, other)
			}
			checked++
			break
		}
	}
	if checked != 2 {
		t.Fatalf("world seed 3 has no one-path-unreachable IPv4 target per path (checked %d); pick another seed", checked)
	}
}

func requirePing(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("ping"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs ping (iputils-ping) (CI=true: not skipping)")
		}
		t.Skip("needs ping (iputils-ping)")
	}
}

// dnsClient queries through path p: bound to its device, so the route and
// the emulator of that path carry the query (UDP and TCP fallback alike).
func dnsClient(p probe.Path, timeout time.Duration) *dns.Client {
	return &dns.Client{Timeout: timeout, Dialer: &net.Dialer{Timeout: timeout, Control: p.Control()}}
}

// TestLabDNSViewsMatchTruth re-derives truth.json by querying each path's
// resolver through that path, and checks that the other path's resolver
// is unreachable.
func TestLabDNSViewsMatchTruth(t *testing.T) {
	l := labtest.Start(t, lab.Options{Domains: 60, WorldSeed: 7})
	if !l.InClient(t) {
		return
	}
	var tr world.Truth
	l.Truth(t, &tr)
	info := l.Config()
	cats := map[string]int{}
	var mu sync.Mutex
	for _, path := range lab.PathNames {
		p := l.Path(t, path)
		plan, _ := info.Plan(path)
		c := dnsClient(p, 800*time.Millisecond)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for _, d := range tr.Domains {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				server := netip.AddrPortFrom(plan.Resolv4, 53).String()
				if d.Rank%5 == 0 { // some over IPv6 transport too
					server = netip.AddrPortFrom(plan.Resolv6, 53).String()
				}
				got, tcpUsed, err := world.Observe(context.Background(), c, server, d.Name, 0)
				if err != nil {
					t.Errorf("%s via %s: %v", d.Name, path, err)
					return
				}
				if d.Category == world.CatLarge && !tcpUsed {
					t.Errorf("%s (large) via %s: answered over UDP, want truncation and TCP fallback", d.Name, path)
				}
				want := d.Paths[path]
				if got.Status != want.Status || !slices.Equal(got.CNAMEs, want.CNAMEs) || !sameAddrs(got.Addrs, want.Addrs) {
					t.Errorf("%s (%s) via %s: served %+v, truth %+v", d.Name, d.Category, path, got, want)
				}
				mu.Lock()
				cats[d.Category]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		// The other path's resolver: no answer at all from here.
		for _, o := range lab.PathNames {
			if o == path {
				continue
			}
			op, _ := info.Plan(o)
			for _, ra := range []netip.Addr{op.Resolv4, op.Resolv6} {
				r, _, err := world.Observe(context.Background(), dnsClient(p, 300*time.Millisecond),
					netip.AddrPortFrom(ra, 53).String(), tr.Domains[0].Name, 4)
				if err != nil || r.Status != world.StatusTimeout {
					t.Errorf("resolver %s of %s answered through %s: %+v %v", ra, o, path, r, err)
				}
			}
		}
	}
	for _, c := range []string{world.CatSame, world.CatDiffer, world.CatOnePath, world.CatNXDomain, world.CatServFail,
		world.CatTimeout, world.CatNoAnswer, world.CatLarge, world.CatPrivate} {
		if cats[c] == 0 {
			t.Errorf("category %s not exercised (world too small?)", c)
		}
	}
}

func sameAddrs(a, b []netip.Addr) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, netip.Addr.Compare)
	slices.SortFunc(b, netip.Addr.Compare)
	return slices.Equal(a, b)
}

// TestLabServers: AnyIP targets accept TCP on 443, refuse closed ports,
// and the sink counts what it was sent, over both families.
func TestLabServers(t *testing.T) {
	l := labtest.Start(t, lab.Options{Domains: 0})
	if !l.InClient(t) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, path := range lab.PathNames {
		p := l.Path(t, path)
		for _, dst := range []string{"198.19.1.1", "[fd00:ff::1:1]", "198.19.200.7", "[fd00:fe::9]", "198.18.200.1"} {
			c, err := probe.DialContext(ctx, p, "tcp", dst+":443")
			if err != nil {
				t.Errorf("%s: connect %s:443: %v", path, dst, err)
				continue
			}
			c.Close()
			if _, err := probe.DialContext(ctx, p, "tcp", dst+":444"); err == nil || !strings.Contains(err.Error(), "refused") {
				t.Errorf("%s: connect %s:444 (closed) = %v, want connection refused", path, dst, err)
			}
		}
		// UDP echo answers from the very address it was sent to: a
		// connected UDP socket accepts nothing else.
		for _, dst := range []string{"198.19.3.4", "[fd00:ff::3:4]", "198.18.200.1"} {
			u, err := probe.DialContext(ctx, p, "udp", dst+":"+strconv.Itoa(lab.PortEcho))
			if err != nil {
				t.Fatalf("%s: udp %s: %v", path, dst, err)
			}
			u.SetDeadline(time.Now().Add(2 * time.Second))
			msg := []byte("hello " + dst)
			if _, err := u.Write(msg); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 100)
			n, err := u.Read(buf)
			if err != nil || string(buf[:n]) != string(msg) {
				t.Errorf("%s: udp echo from %s: %q, %v", path, dst, buf[:n], err)
			}
			u.Close()
		}
		c, err := probe.DialContext(ctx, p, "tcp", "[fd00:200::1]:"+strconv.Itoa(lab.PortSink))
		if err != nil {
			t.Fatalf("%s: sink: %v", path, err)
		}
		n, err := io.Copy(c, io.LimitReader(zeros{}, 300_000))
		if err != nil {
			t.Fatal(err)
		}
		c.(*net.TCPConn).CloseWrite()
		var b [8]byte
		if _, err := io.ReadFull(c, b[:]); err != nil {
			t.Fatalf("%s: sink count: %v", path, err)
		}
		c.Close()
		if got := binary.BigEndian.Uint64(b[:]); got != uint64(n) {
			t.Errorf("%s: sink counted %d bytes, sent %d", path, got, n)
		}
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// fetch asks the lab's source server for n bytes through conn and returns
// how long the data took from the request to the last byte.
func fetch(c net.Conn, n int64) (time.Duration, error) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	t0 := time.Now()
	if _, err := c.Write(b[:]); err != nil {
		return 0, err
	}
	got, err := io.Copy(io.Discard, c)
	if err != nil {
		return 0, err
	}
	if got != n {
		return 0, fmt.Errorf("got %d of %d bytes", got, n)
	}
	return time.Since(t0), nil
}

var pingTime = regexp.MustCompile(`time=([0-9.]+) ms`)

// pingRTTs pings addr n times through dev and returns the RTTs in ms.
func pingRTTs(t *testing.T, l *labtest.Lab, dev string, addr netip.Addr, n int) []float64 {
	t.Helper()
	out, err := l.Exec(context.Background(), "client", "ping", "-n", "-c", strconv.Itoa(n), "-i", "0.02", "-W", "2", "-I", dev, addr.String())
	if err != nil {
		t.Fatalf("ping -I %s %s: %v: %s", dev, addr, err, out)
	}
	var rtts []float64
	for _, m := range pingTime.FindAllStringSubmatch(string(out), -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		rtts = append(rtts, v)
	}
	return rtts
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func TestLabTimeline(t *testing.T) {
	ev, err := emu.ParseTimeline(strings.NewReader("t=0s wwan0 delay=7ms\nt=300ms wlan0 down\n"))
	if err != nil {
		t.Fatal(err)
	}
	l := labtest.Start(t, lab.Options{Domains: 0, Timeline: ev})
	st := l.Status(t)
	if st.Paths[0].LinkDown {
		t.Fatal("wlan0 down before its time in the timeline")
	}
	time.Sleep(600 * time.Millisecond)
	st = l.Status(t)
	if !st.Paths[0].LinkDown || st.Paths[1].Up.Delay != 7*time.Millisecond {
		t.Errorf("after the timeline: wlan0 down=%v (want true), wwan0 delay %v (want 7ms)", st.Paths[0].LinkDown, st.Paths[1].Up.Delay)
	}
}

func TestLabWorldShares(t *testing.T) {
	sh := world.DefaultShares()
	sh.NXDomain = 0.5
	l := labtest.Start(t, lab.Options{Domains: 100, WorldSeed: 2, WorldShares: &sh})
	var tr world.Truth
	l.Truth(t, &tr)
	n := 0
	for _, d := range tr.Domains {
		if d.Category == world.CatNXDomain {
			n++
		}
	}
	if n != 50 {
		t.Errorf("nxdomain share 0.5 of 100 domains gave %d", n)
	}
}

// TestLabWorldFile: a saved world is served as saved.
func TestLabWorldFile(t *testing.T) {
	w, err := world.Generate(world.Options{Seed: 9, Domains: 30})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "world.json")
	if err := w.Save(f); err != nil {
		t.Fatal(err)
	}
	l := labtest.Start(t, lab.Options{WorldFile: f})
	var tr world.Truth
	l.Truth(t, &tr)
	if tr.Seed != 9 || len(tr.Domains) != 30 || tr.Domains[0].Name != w.Domains[0].Name || l.Config().Domains != 30 {
		t.Errorf("lab serves seed %d with %d domains (first %q), want the saved world (seed 9, 30, %q)",
			tr.Seed, len(tr.Domains), tr.Domains[0].Name, w.Domains[0].Name)
	}
}

// TestLabScenarioTruth: a named scenario started through the control
// socket records when its step took effect, and abrupt-linkdown takes the
// client's wlan0 down in the kernel too (and the emulator's truth shows no
// Wi-Fi packet delivered after it).
func TestLabScenarioTruth(t *testing.T) {
	l := labtest.Start(t, lab.Options{Domains: 0})
	t0 := time.Now()
	l.Scenario(t, "abrupt-linkdown")
	time.Sleep(lab.ScenarioStart + 500*time.Millisecond)
	st := l.Status(t)
	tr := st.Timeline
	if tr == nil || tr.Scenario != "abrupt-linkdown" || !tr.Done || len(tr.Steps) != 1 {
		t.Fatalf("timeline truth %+v", tr)
	}
	s := tr.Steps[0]
	if late := s.Applied.Sub(tr.Started) - s.At; late < 0 || late > 50*time.Millisecond || tr.Started.Before(t0) {
		t.Errorf("step applied %v after its time", late)
	}
	// Going down the kernel's link goes first, microseconds before the
	// emulator's.
	if s.Kernel.IsZero() || s.Kernel.After(s.Applied) || s.Applied.Sub(s.Kernel) > 5*time.Millisecond || s.Error != "" {
		t.Errorf("kernel link step %+v", s)
	}
	out, err := l.Exec(context.Background(), "client", "ip", "link", "show", "wlan0")
	_, flags, _ := strings.Cut(string(out), "<")
	flags, _, _ = strings.Cut(flags, ">")
	if err != nil || slices.Contains(strings.Split(flags, ","), "UP") {
		t.Errorf("wlan0 still up in the kernel after abrupt-linkdown: %s %v", out, err)
	}
	if a := st.Paths[0].Stats.Down.Activity; a.LastOut.After(s.Applied) {
		t.Errorf("wlan0 delivered a packet at %v, after the link went down at %v", a.LastOut, s.Applied)
	}
}
