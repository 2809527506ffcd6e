package survey

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSnmpValue(t *testing.T) {
	snmp := []byte("Ip: Forwarding DefaultTTL InReceives OutDiscards OutNoRoutes\nIp: 2 64 100 7 3\n" +
		"Icmp: InMsgs OutDiscards\nIcmp: 1 99\n")
	assert.Equal(t, uint64(7), snmpValue(snmp, "Ip:", "OutDiscards"))
	assert.Equal(t, uint64(99), snmpValue(snmp, "Icmp:", "OutDiscards"))
	assert.Zero(t, snmpValue(snmp, "Ip:", "NoSuch"))
	snmp6 := []byte("Ip6InReceives                   \t12\nIp6OutDiscards                  \t4\n")
	assert.Equal(t, uint64(4), snmpValue(snmp6, "", "Ip6OutDiscards"))
	assert.Zero(t, snmpValue(snmp6, "", "Ip6OutNoRoutes"))
}

// BenchmarkHostSample: one read of the host counters (softnet_stat,
// /proc/stat, snmp, snmp6, the paths' interface counters by netlink).
func BenchmarkHostSample(b *testing.B) {
	h := newHostCounters([]string{"lo"})
	for b.Loop() {
		h.sample()
	}
}
