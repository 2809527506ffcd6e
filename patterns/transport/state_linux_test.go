package transport

import (
	"net"
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
