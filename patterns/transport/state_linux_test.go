package transport

import (
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSampleTCPMatchesKernel: our tcp_info decoding agrees with x/sys's
// typed struct for the same socket.
func TestSampleTCPMatchesKernel(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			buf := make([]byte, 1<<16)
			for {
				if _, err := c.Read(buf); err != nil {
					return
				}
			}
		}
	}()
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(make([]byte, 100000)); err != nil {
		t.Fatal(err)
	}
	tc := c.(*net.TCPConn)
	st := sampleTCP(tc)
	got, ok := st.Data.(*TCPInfo)
	if !ok {
		t.Fatalf("sample: %s", st.Err)
	}
	rc, _ := tc.SyscallConn()
	var want *unix.TCPInfo
	_ = rc.Control(func(fd uintptr) { want, _ = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) })
	if got.State != want.State || got.SndMSS != want.Snd_mss || got.BytesSent != want.Bytes_sent || got.SegsOut > want.Segs_out || got.RTT == 0 {
		t.Fatalf("decoded %+v\nkernel %+v", got, want)
	}
	if got.BytesSent < 100000 {
		t.Fatalf("bytes_sent %d, wrote 100000", got.BytesSent)
	}
}

// TestSubflowFlagsFromKernel: an MPTCP connection on loopback; its one
// subflow's flags come back from sock_diag (as root: CAP_NET_ADMIN) with
// MPTCP capable and not backup; a 4-tuple no socket has is an error.
func TestSubflowFlagsFromKernel(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("the kernel gives the MPTCP subflow info to CAP_NET_ADMIN only")
	}
	var lc net.ListenConfig
	lc.SetMultipathTCP(true)
	ln, err := lc.Listen(context.Background(), "tcp4", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no MPTCP here: %v", err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			_, _ = io.Copy(io.Discard, c)
		}
	}()
	var d net.Dialer
	d.SetMultipathTCP(true)
	c, err := d.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	st := sampleMPTCP(c.(*net.TCPConn))
	m, ok := st.Data.(*MPTCPState)
	if !ok || len(m.Subflows) != 1 {
		t.Skipf("no MPTCP_FULL_INFO here: %+v %s", st.Data, st.Err)
	}
	sf := m.Subflows[0]
	f, err := subflowFlags(sf.Local, sf.Remote, 0)
	if err != nil {
		t.Fatal(err)
	}
	const mcapLocal, mcapRemote = 0x2, 0x1
	if f&(mcapLocal|mcapRemote) == 0 || f&(SubflowBackupLocal|SubflowBackupRemote) != 0 {
		t.Fatalf("flags %#x", f)
	}
	wrong := netip.AddrPortFrom(sf.Remote.Addr(), sf.Remote.Port()+1)
	if _, err := subflowFlags(sf.Local, wrong, 0); err == nil {
		t.Fatal("flags of a socket that does not exist")
	}
}
