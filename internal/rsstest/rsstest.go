// Package rsstest measures a test's resident set: in a process of its own
// (a process that ran other tests first starts from their heap, and the
// garbage collector lets it grow in proportion), from the kernel's count.
package rsstest

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

const freshEnv = "MPTESTER_FRESH_PROCESS"

// InFreshProcess runs the calling test again in a new process of this
// test binary and reports whether the caller is that process; the caller
// returns at once when it is not. The child's output is logged and its
// failure fails the caller.
func InFreshProcess(t *testing.T) bool {
	t.Helper()
	if os.Getenv(freshEnv) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), freshEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	t.Logf("in a fresh process:\n%s", out)
	if err != nil {
		t.Fatalf("the test in a fresh process: %v", err)
	}
	return false
}

// MB is a field of /proc/self/status in MB: VmRSS (resident now) or VmHWM
// (the peak since ResetPeak). Where /proc is missing it is the Go
// runtime's memory obtained from the OS, an upper bound of the heap's part.
func MB(field string) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, field+":"); ok {
				var kb float64
				if _, err := fmt.Sscanf(strings.TrimSpace(v), "%f kB", &kb); err == nil {
					return kb / 1024
				}
			}
		}
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.Sys) / (1 << 20)
}

// ResetPeak returns freed memory to the OS and restarts VmHWM from the
// current resident set (Linux >= 4.0), so the peak read later is the
// caller's. It reports whether the kernel took the reset.
func ResetPeak() bool {
	runtime.GC()
	debug.FreeOSMemory()
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}
