package capture

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"

	"github.com/mptester/mptester/internal/nstest"
)

// TestCaptureLoopback: a real TCP exchange on lo is captured with its
// timeline and bytes, and the pcap holds exactly the matched packets.
func TestCaptureLoopback(t *testing.T) {
	if os.Getuid() != 0 {
		nstest.SkipUnless(t, "capture needs CAP_NET_RAW (root)")
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c) // echo
	}()
	srv := netip.MustParseAddrPort(ln.Addr().String())
	dir := t.TempDir()
	c, err := Start(context.Background(), Options{Ifaces: []string{"lo"}, Flows: []Flow{{Proto: "tcp", Server: srv}}, PcapDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	conn, err := net.Dial("tcp4", srv.String())
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1000)
	for range 10 {
		if _, err := conn.Write(buf); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(conn, buf); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t1 := time.Now()
	conn.Close()
	time.Sleep(200 * time.Millisecond)
	r := c.Stop()
	a := r.Of("lo", Flow{Proto: "tcp", Server: srv})
	t.Logf("%+v %+v", a, r.Ifaces)
	// On lo the socket sees each packet twice (sent, then received);
	// 10 KB of data each way.
	if a.FirstDataOut.Before(t0) || a.FirstDataOut.After(t1) || a.LastDataIn.After(t1) || a.LastDataIn.Before(a.FirstDataOut) ||
		a.BytesOut < 20_000 || a.BytesIn < 20_000 || a.BytesOut > 30_000 {
		t.Errorf("activity %+v", a)
	}
	if len(r.Ifaces) != 1 || r.Ifaces[0].Drops != 0 || r.Ifaces[0].Error != "" || r.Ifaces[0].Matched != a.PacketsOut+a.PacketsIn || r.Ifaces[0].CPU <= 0 {
		t.Fatalf("stats %+v", r.Ifaces)
	}
	f, err := os.Open(filepath.Join(dir, "lo.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pr, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	n := uint64(0)
	for {
		if _, _, err := pr.ReadPacketData(); err != nil {
			break
		}
		n++
	}
	if n != r.Ifaces[0].Matched {
		t.Errorf("pcap has %d packets, %d matched", n, r.Ifaces[0].Matched)
	}
}

// TestCaptureWithoutCapNetRaw: an unprivileged user gets ErrPermission,
// which names the fix.
func TestCaptureWithoutCapNetRaw(t *testing.T) {
	if os.Getenv("CAPTURE_TEST_CHILD") == "1" {
		_, err := Start(context.Background(), Options{Ifaces: []string{"lo"}})
		if !errors.Is(err, ErrPermission) {
			t.Fatalf("unprivileged Start: %v", err)
		}
		t.Logf("%v", err)
		return
	}
	if os.Getuid() != 0 {
		nstest.SkipUnless(t, "dropping privileges needs root")
	}
	sp, err := exec.LookPath("setpriv")
	if err != nil {
		nstest.SkipUnless(t, "needs setpriv (util-linux)")
	}
	cmd := exec.Command(sp, "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", os.Args[0], "-test.run=^TestCaptureWithoutCapNetRaw$", "-test.v")
	cmd.Env = append(os.Environ(), "CAPTURE_TEST_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
