package emu

import (
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sockPort is the test's end of a SOCK_SEQPACKET socketpair whose other
// end is the link's device (a nonblocking *os.File, read like a TUN). The
// kernel stamps each packet the link writes (SO_TIMESTAMPNS), so delays
// are measured without the test's own scheduling delays on receive.
type sockPort struct {
	fd  int
	out chan frame
}

func newSockPort(t testing.TB) (dev *os.File, p *sockPort) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20)
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	}
	if err := unix.SetsockoptInt(fds[1], unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		t.Fatal(err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		t.Fatal(err)
	}
	p = &sockPort{fd: fds[1], out: make(chan frame, 1<<16)}
	done := make(chan struct{})
	go p.recvLoop(done)
	t.Cleanup(func() {
		unix.Shutdown(p.fd, unix.SHUT_RDWR) // ends the blocked recvmsg
		<-done
		unix.Close(p.fd)
	})
	return os.NewFile(uintptr(fds[0]), "sockdev"), p
}

func (p *sockPort) recvLoop(done chan struct{}) {
	defer close(done)
	buf := make([]byte, 65536)
	oob := make([]byte, 128)
	for {
		n, oobn, _, _, err := unix.Recvmsg(p.fd, buf, oob, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return
		}
		ts := time.Now()
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, m := range msgs {
				if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPNS && len(m.Data) >= 16 {
					tsp := (*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
					ts = time.Unix(tsp.Unix())
				}
			}
		}
		select {
		case p.out <- frame{append([]byte(nil), buf[:n]...), ts}:
		default:
		}
	}
}

func (p *sockPort) send(b []byte) time.Time {
	t := time.Now()
	for {
		_, err := unix.Write(p.fd, b)
		if err != unix.EINTR {
			return t
		}
	}
}

func (p *sockPort) frames() <-chan frame { return p.out }

// startTimedLink runs a Link between socketpair devices: the link reads
// them like TUN fds (its locked-thread reader) and the test gets kernel
// write timestamps.
//
// GC is off meanwhile: during a cycle the idle Ps run mark workers, so a
// waking emulator thread finds no free P and waits for the Go scheduler,
// which on a loaded host took milliseconds. The tests measure the
// emulator; docs/benchmarks.md notes the GC effect.
func startTimedLink(t testing.TB, seed int64) *testLink {
	t.Helper()
	runtime.GC()
	gc := debug.SetGCPercent(-1)
	t.Cleanup(func() { debug.SetGCPercent(gc) })
	cdev, cli := newSockPort(t)
	idev, inet := newSockPort(t)
	return runLink(t, seed, cdev, idev, cli, inet)
}
