package linkstats

import (
	"os"
	"path/filepath"
	"sync"
)

// ProcNet is the path of name under the calling thread's /proc/…/net.
// /proc/net links to /proc/self/net, which shows the namespace of the
// process's main thread, not of a thread that setns'd into a lab
// namespace (lab.InNS); /proc/thread-self (Linux 3.17) shows the caller's.
// Callers that read counters of a namespace must read them from a thread
// locked in it.
func ProcNet(name string) string { return filepath.Join(procNetRoot(), name) }

// procNetRoot is looked up once: whether the kernel has thread-self does
// not change while the process runs.
var procNetRoot = sync.OnceValue(func() string {
	if _, err := os.Stat("/proc/thread-self/net"); err == nil {
		return "/proc/thread-self/net"
	}
	return "/proc/net"
})
