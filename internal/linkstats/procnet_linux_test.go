package linkstats

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mptester/mptester/internal/nstest"
)

// TestProcNetIsTheCallingThreads: a thread in its own network namespace
// (as lab.InNS makes one) finds that namespace's interfaces under
// ProcNet, where /proc/net shows the main thread's namespace instead.
// CI once read the host's UDP counters this way and missed every drop
// in a lab namespace.
func TestProcNetIsTheCallingThreads(t *testing.T) {
	nstest.RequireRoot(t)
	const veth = "mptpn0" // in a namespace of its own: no name to clash with
	errc := make(chan error, 1)
	var inOwnNS func()
	inOwnNS = func() {
		runtime.LockOSThread()
		if unix.Gettid() == os.Getpid() {
			// The main thread: /proc/net would show its namespace too, and
			// the test could not fail. Hold it and work on another thread.
			done := make(chan struct{})
			go func() { inOwnNS(); close(done) }()
			<-done
			runtime.UnlockOSThread()
			return
		}
		// Never unlocked: the thread, and with it the namespace and its
		// veth, go when this goroutine returns.
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		if out, err := exec.Command("ip", "link", "add", veth, "type", "veth", "peer", "name", veth+"p").CombinedOutput(); err != nil {
			errc <- fmt.Errorf("ip link add: %v: %s", err, out)
			return
		}
		mine, err := os.ReadFile(ProcNet("dev"))
		if err != nil {
			errc <- err
			return
		}
		mains, err := os.ReadFile("/proc/net/dev")
		if err != nil {
			errc <- err
			return
		}
		switch {
		case !bytes.Contains(mine, []byte(veth+":")):
			errc <- fmt.Errorf("%s does not list %s, made in this thread's namespace:\n%s", ProcNet("dev"), veth, mine)
		case bytes.Contains(mains, []byte(veth+":")):
			errc <- fmt.Errorf("/proc/net/dev lists %s too: the main thread is in this namespace, so the test proves nothing", veth)
		default:
			errc <- nil
		}
	}
	go inOwnNS()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
