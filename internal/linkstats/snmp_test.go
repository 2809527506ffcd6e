package linkstats

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSnmpValue(t *testing.T) {
	snmp := []byte("Ip: Forwarding DefaultTTL InReceives OutDiscards OutNoRoutes\nIp: 2 64 100 7 3\n" +
		"Icmp: InMsgs OutDiscards\nIcmp: 1 99\n")
	assert.Equal(t, uint64(7), SNMPValue(snmp, "Ip:", "OutDiscards"))
	assert.Equal(t, uint64(99), SNMPValue(snmp, "Icmp:", "OutDiscards"))
	assert.Zero(t, SNMPValue(snmp, "Ip:", "NoSuch"))
	snmp6 := []byte("Ip6InReceives                   \t12\nIp6OutDiscards                  \t4\n")
	assert.Equal(t, uint64(4), SNMPValue(snmp6, "", "Ip6OutDiscards"))
	assert.Zero(t, SNMPValue(snmp6, "", "Ip6OutNoRoutes"))
}

func TestUDPRcvbufErrors(t *testing.T) {
	if _, err := os.Stat("/proc/net/snmp"); err != nil {
		t.Skip("no /proc/net/snmp on this system")
	}
	_, err := UDPRcvbufErrors()
	assert.NoError(t, err)
}
