package patterns

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ifaceCounters reads the kernel's byte counters of an interface: the
// per-path (wifi/cell) counters of the reference app. They count every
// packet of the interface, so other traffic during a test is included.
func ifaceCounters(name string) (tx, rx uint64, ok bool) {
	read := func(f string) (uint64, bool) {
		b, err := os.ReadFile(filepath.Join("/sys/class/net", name, "statistics", f))
		if err != nil {
			return 0, false
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		return v, err == nil
	}
	tx, ok1 := read("tx_bytes")
	rx, ok2 := read("rx_bytes")
	return tx, rx, ok1 && ok2
}
