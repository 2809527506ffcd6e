package emu

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// readRaw reads a nonblocking fd device (a TUN from OpenTUN) on the
// reader's own locked thread: ppoll on the fd and the reader's eventfd, so
// arrival stamps do not wait for the Go netpoller and Close can interrupt
// the wait. ok is false when src is not such a device.
func (d *direction) readRaw() (ok bool, err error) {
	sc, isConn := d.src.(syscall.Conn)
	ew, isEvent := d.rw.(*eventWaiter)
	if !isConn || !isEvent {
		return false, nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false, nil
	}
	nonblock := false
	if cerr := rc.Control(func(fd uintptr) {
		fl, ferr := unix.FcntlInt(fd, unix.F_GETFL, 0)
		nonblock = ferr == nil && fl&unix.O_NONBLOCK != 0
	}); cerr != nil || !nonblock {
		return false, nil
	}
	lockThread()
	buf := make([]byte, 65536)
	var rerr error
	// The callback holds a reference on the fd, so the fd number cannot be
	// reused under us; closing the file waits for the callback to return,
	// which it does when woken by Close or after an idle pollInterval (for
	// a file closed by someone else).
	read := func(fd uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(ew.fd), Events: unix.POLLIN}}
		ts := unix.NsecToTimespec(int64(pollInterval))
		for !d.l.closing.Load() {
			n, err := unix.Read(int(fd), buf)
			switch {
			case err == nil:
				if n > 0 {
					d.handle(buf[:n], d.l.now())
				}
			case err == unix.EAGAIN:
				k, _ := unix.Ppoll(fds, &ts, nil)
				if k == 0 {
					return true // idle: let a pending Close of the file proceed
				}
				if fds[1].Revents != 0 {
					var b [8]byte
					unix.Read(ew.fd, b[:])
				}
			case err == unix.EINTR:
			default:
				rerr = err
				return true
			}
		}
		return true
	}
	for {
		err := rc.Read(read)
		if d.l.closing.Load() {
			return true, nil
		}
		if rerr != nil {
			return true, rerr
		}
		if err != nil {
			return true, err
		}
	}
}

// pollInterval bounds how long an idle raw reader holds its fd.
const pollInterval = 100 * time.Millisecond
