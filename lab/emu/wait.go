package emu

import "time"

// RealtimePriority is the SCHED_FIFO priority (1..99) of the reader and
// writer threads on Linux when the process may use it; 0 keeps them in the
// normal scheduler. Read when a Link starts running.
var RealtimePriority = 10

// waiter lets the writer sleep until a deadline or until the reader queues
// an earlier packet.
type waiter interface {
	wait(ns int64) // ns < 0: until woken
	wake()
	close()
}

// chanWaiter is the portable waiter on Go timers (~1 ms late; the writer's
// spin hides part of that).
type chanWaiter struct{ c chan struct{} }

func newChanWaiter() *chanWaiter { return &chanWaiter{c: make(chan struct{}, 1)} }

func (w *chanWaiter) wait(ns int64) {
	if ns < 0 {
		<-w.c
		return
	}
	t := time.NewTimer(time.Duration(ns))
	select {
	case <-w.c:
	case <-t.C:
	}
	t.Stop()
}

func (w *chanWaiter) wake() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}

func (w *chanWaiter) close() {}
