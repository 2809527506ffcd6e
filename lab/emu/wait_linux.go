package emu

import (
	"encoding/binary"
	"runtime"

	"golang.org/x/sys/unix"
)

// eventWaiter sleeps in ppoll on an eventfd: the timeout has nanosecond
// resolution (with the 1 ns timer slack set by lockWriterThread) and a
// write to the eventfd ends the sleep early.
type eventWaiter struct{ fd int }

func newWaiter() waiter {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return newChanWaiter()
	}
	return &eventWaiter{fd: fd}
}

func (w *eventWaiter) wait(ns int64) {
	fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
	var ts *unix.Timespec
	if ns >= 0 {
		t := unix.NsecToTimespec(ns)
		ts = &t
	}
	if n, _ := unix.Ppoll(fds, ts, nil); n > 0 {
		var b [8]byte
		unix.Read(w.fd, b[:])
	}
}

func (w *eventWaiter) wake() {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], 1)
	unix.Write(w.fd, b[:])
}

func (w *eventWaiter) close() { unix.Close(w.fd) }

// lockThread gives the reader or writer its own OS thread with 1 ns timer
// slack (default 50 µs) and, when permitted (root), SCHED_FIFO priority
// RealtimePriority so busy neighbours cannot delay its wake-ups by a
// scheduler slice. Its spin is bounded (spinNs) and the kernel's RT
// throttling still applies. The goroutine never unlocks, so the thread
// exits with it and the settings do not leak to other goroutines.
func lockThread() {
	runtime.LockOSThread()
	unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	if p := RealtimePriority; p > 0 {
		// RESET_ON_FORK: a thread this one ever creates starts as normal.
		unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO,
			Flags: unix.SCHED_FLAG_RESET_ON_FORK, Priority: uint32(p)}, 0)
	}
}
