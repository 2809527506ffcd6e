package survey

import (
	"testing"
)

// BenchmarkHostSample: one read of the host counters (softnet_stat,
// /proc/stat, snmp, snmp6, the paths' interface counters by netlink).
func BenchmarkHostSample(b *testing.B) {
	h := newHostCounters([]string{"lo"})
	for b.Loop() {
		h.sample()
	}
}
