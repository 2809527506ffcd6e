package lab_test

import (
	"context"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mptester/mptester/internal/nstest"
	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/labtest"
	"github.com/mptester/mptester/probe"
)

// requireNft: impairment tests need nftables; under CI=true a missing
// nft fails them (CI installs it).
func requireNft(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		nstest.SkipUnless(t, "impairment tests need nftables (nft): apt-get install nftables")
	}
}

// reach is what the client measures on one path: each check a fact about
// the network, compared with the planted impairments.
type reach struct {
	udp443, udp7, bigUDP, smallUDP, mptcp, v4, v6 bool
}

func measureReach(t *testing.T, p probe.Path) reach {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	echo := func(dst string, size int) bool {
		c, err := probe.ListenUDP(ctx, p, probe.Family4)
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		defer c.Close()
		to := net.UDPAddrFromAddrPort(netip.MustParseAddrPort(dst))
		buf := make([]byte, 2048)
		for range 3 {
			if _, err := c.WriteTo(make([]byte, size), to); err != nil {
				t.Fatalf("%s: send to %s: %v", p.Name, dst, err)
			}
			_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			if n, _, err := c.ReadFrom(buf); err == nil && n == size {
				return true
			}
		}
		return false
	}
	dial := func(addr string) bool {
		dctx, cancel := context.WithTimeout(ctx, 800*time.Millisecond)
		defer cancel()
		c, err := probe.DialContext(dctx, p, "tcp", addr)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}
	var r reach
	r.udp443 = echo("198.19.0.1:443", 32)
	r.udp7 = echo("198.19.0.1:7", 32)
	// 1300 bytes of payload make a 1328-byte packet; 1200 make 1228.
	r.bigUDP = echo("198.19.0.1:7", 1300)
	r.smallUDP = echo("198.19.0.1:7", 1200)
	r.v4 = dial("198.19.0.1:443")
	r.v6 = dial("[fd00:ff::1]:443")
	mc, err := probe.DialMPTCP(ctx, p, "tcp", "198.19.0.1:5001")
	if err != nil {
		t.Fatalf("%s: MPTCP dial: %v", p.Name, err)
	}
	r.mptcp = mc.Negotiated
	mc.Close()
	return r
}

// Every impairment planted on wlan0 at once (they compose) is measured
// there and only there; lab status records each as truth; clearing them
// restores the clean path, measured through the same checks.
func TestLabImpairments(t *testing.T) {
	requireNft(t)
	l := labtest.Start(t, lab.Options{})
	clean := reach{udp443: true, udp7: true, bigUDP: true, smallUDP: true, mptcp: true, v4: true, v6: true}
	if !labtest.IsChild() {
		// A UDP echo on port 443 of every Internet address (the lab's
		// own is on port 7).
		echoUDP(t, l.Lab, ":443")
		l.Set(t, "wlan0", "block=udp/443", "strip=mptcp", "v6=blackhole", "pmtu=1280,icmp=drop")
		st := l.Status(t)
		var got []string
		for _, im := range st.Impairments {
			got = append(got, im.Path+" "+im.Setting)
			if im.Where == "" || im.Since.IsZero() {
				t.Errorf("impairment %+v: where and since must be recorded", im)
			}
		}
		want := []string{"wlan0 block=udp/443", "wlan0 strip=mptcp", "wlan0 v6=blackhole", "wlan0 pmtu=1280,icmp=drop"}
		if !slices.Equal(got, want) {
			t.Errorf("status impairments %q, want %q", got, want)
		}
	}
	if l.InClient(t) {
		want := map[string]reach{
			"wlan0": {udp443: false, udp7: true, bigUDP: false, smallUDP: true, mptcp: false, v4: true, v6: false},
			"wwan0": clean,
		}
		for _, name := range lab.PathNames {
			if got := measureReach(t, l.Path(t, name)); got != want[name] {
				t.Errorf("%s measured %+v, planted %+v", name, got, want[name])
			}
		}
		return
	}
	if !labtest.IsChild() {
		l.Set(t, "wlan0", "block=off", "strip=off", "v6=ok", "pmtu=off", "icmp=pass")
		if st := l.Status(t); len(st.Impairments) != 0 {
			t.Errorf("after clearing, status impairments %+v, want none", st.Impairments)
		}
		out, err := exec.Command("ip", "netns", "exec", l.Config().Namespaces.Internet, "nft", "list", "tables").CombinedOutput()
		if err != nil || strings.Contains(string(out), "mpt_wlan0") {
			t.Errorf("nft tables after clearing: %s (%v), want no mpt_wlan0", out, err)
		}
	}
	if l.InClient(t) {
		for _, name := range lab.PathNames {
			if got := measureReach(t, l.Path(t, name)); got != clean {
				t.Errorf("clean %s measured %+v, want %+v", name, got, clean)
			}
		}
		return
	}
}

// A timeline plants and lifts impairments at its times; the truth records
// each step with its impairment settings, and the status what holds now.
func TestLabTimelineImpairments(t *testing.T) {
	requireNft(t)
	ev, err := lab.ParseTimeline(strings.NewReader("t=0 wlan0 block=udp/443\nt=200ms wlan0 block=off strip=mptcp\n"))
	if err != nil {
		t.Fatal(err)
	}
	l := labtest.Start(t, lab.Options{Timeline: ev})
	var st lab.Status
	for range 100 {
		if st = l.Status(t); st.Timeline != nil && st.Timeline.Done {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st.Timeline == nil || !st.Timeline.Done || len(st.Timeline.Steps) != 2 {
		t.Fatalf("timeline truth %+v", st.Timeline)
	}
	for i, want := range []string{"block=udp/443", "block=off strip=mptcp"} {
		if s := st.Timeline.Steps[i]; s.Change != want || s.Error != "" {
			t.Errorf("step %d: %q (error %q), want %q", i, s.Change, s.Error, want)
		}
	}
	if len(st.Impairments) != 1 || st.Impairments[0].Setting != "strip=mptcp" {
		t.Errorf("impairments after the timeline %+v, want strip=mptcp alone", st.Impairments)
	}
}

// quic-interfere=443 lets each UDP flow to 443 on wlan0 pass its first
// QUICInterfereAfter packets and drops the rest; a new flow passes again;
// wwan0 is untouched.
func TestLabQUICInterfere(t *testing.T) {
	requireNft(t)
	l := labtest.Start(t, lab.Options{})
	if !labtest.IsChild() {
		echoUDP(t, l.Lab, ":443")
		l.Set(t, "wlan0", "quic-interfere=443")
		if st := l.Status(t); len(st.Impairments) != 1 || st.Impairments[0].Setting != "quic-interfere=443" {
			t.Errorf("status impairments %+v", st.Impairments)
		}
	}
	if !l.InClient(t) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// answered counts the echoes of 6 datagrams sent one after the other
	// on one socket (one flow).
	answered := func(p probe.Path) int {
		c, err := probe.ListenUDP(ctx, p, probe.Family4)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		to := net.UDPAddrFromAddrPort(netip.MustParseAddrPort("198.19.0.1:443"))
		buf := make([]byte, 64)
		n := 0
		for range 6 {
			if _, err := c.WriteTo([]byte("x"), to); err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			if _, _, err := c.ReadFrom(buf); err == nil {
				n++
			}
		}
		return n
	}
	wlan, wwan := l.Path(t, "wlan0"), l.Path(t, "wwan0")
	for i := range 2 { // the second flow passes its first packets again
		if got := answered(wlan); got != lab.QUICInterfereAfter {
			t.Errorf("wlan0 flow %d: %d of 6 answered, want the first %d", i+1, got, lab.QUICInterfereAfter)
		}
	}
	if got := answered(wwan); got != 6 {
		t.Errorf("wwan0: %d of 6 answered, want 6", got)
	}
}

// block=udp/443@PREFIX drops UDP 443 from wlan0 towards the named
// prefixes only: the same port elsewhere, and other ports there, pass;
// wwan0 is untouched; the truth lists the rules with their prefixes.
func TestLabBlockPrefix(t *testing.T) {
	requireNft(t)
	l := labtest.Start(t, lab.Options{})
	const setting = "block=udp/443@198.19.127.0/24,udp/443@fd00:ff::ffff:0/112"
	if !labtest.IsChild() {
		echoUDP(t, l.Lab, ":443")
		echoUDP(t, l.Lab, ":7443")
		l.Set(t, "wlan0", setting)
		st := l.Status(t)
		if len(st.Impairments) != 1 || st.Impairments[0].Setting != setting || len(st.Impairments[0].Rules) != 2 ||
			st.Impairments[0].Rules[1].Prefix != netip.MustParsePrefix("fd00:ff::ffff:0/112") {
			t.Errorf("status impairments %+v, want wlan0 %s with its two rules", st.Impairments, setting)
		}
	}
	if !l.InClient(t) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	echo := func(p probe.Path, dst string) bool {
		ap := netip.MustParseAddrPort(dst)
		fam := probe.Family4
		if ap.Addr().Is6() {
			fam = probe.Family6
		}
		c, err := probe.ListenUDP(ctx, p, fam)
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		defer c.Close()
		buf := make([]byte, 64)
		for range 3 {
			if _, err := c.WriteTo([]byte("x"), net.UDPAddrFromAddrPort(ap)); err != nil {
				t.Fatalf("%s: send to %s: %v", p.Name, dst, err)
			}
			_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			if _, _, err := c.ReadFrom(buf); err == nil {
				return true
			}
		}
		return false
	}
	blocked := []string{"198.19.127.1:443", "[fd00:ff::ffff:1]:443"}
	for _, name := range lab.PathNames {
		p := l.Path(t, name)
		for _, dst := range []string{"198.19.127.1:443", "198.19.126.1:443", "198.19.127.1:7443", "[fd00:ff::ffff:1]:443", "[fd00:ff::fffe:1]:443", "[fd00:ff::ffff:1]:7443"} {
			want := !(name == "wlan0" && slices.Contains(blocked, dst))
			if got := echo(p, dst); got != want {
				t.Errorf("%s: UDP to %s answered %v, planted %v", name, dst, got, want)
			}
		}
	}
}

// echoUDP answers every datagram to port (":443") of the lab's Internet
// addresses with itself, until the lab closes the socket.
func echoUDP(t *testing.T, l *lab.Lab, port string) {
	t.Helper()
	pc, err := l.ListenUDP(port)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(buf[:n], from)
		}
	}()
}
