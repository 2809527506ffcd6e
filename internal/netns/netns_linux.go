package netns

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Do runs fn on an OS thread locked in network namespace name. Sockets fn
// creates belong to that namespace for their whole life and may be used
// from any goroutine; counters fn reads must come from linkstats.ProcNet,
// since /proc/net shows the main thread's namespace. The thread goes back
// to its own namespace before the runtime may reuse it; if it cannot, it
// stays locked and the runtime discards it (or, for the main thread,
// parks it), so no goroutine ever runs in a namespace it did not ask for.
func Do(name string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- fmt.Errorf("this thread's netns: %w", err)
			return
		}
		defer own.Close()
		f, err := os.Open("/run/netns/" + name)
		if err != nil {
			errc <- fmt.Errorf("open netns %s: %w", name, err)
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", name, err)
			return
		}
		err = fn()
		if unix.Setns(int(own.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}
