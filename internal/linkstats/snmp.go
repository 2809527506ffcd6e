package linkstats

import (
	"bytes"
	"os"
	"strconv"
)

// SNMPValue finds counter name in /proc/net/snmp (prefix "Ip:": a line of
// names, then a line of values) or /proc/net/snmp6 (prefix "": "name
// value" lines); 0 when absent.
func SNMPValue(b []byte, prefix, name string) uint64 {
	lines := bytes.Split(b, []byte("\n"))
	for i, line := range lines {
		f := bytes.Fields(line)
		if len(f) == 0 {
			continue
		}
		if prefix == "" {
			if len(f) == 2 && string(f[0]) == name {
				n, _ := strconv.ParseUint(string(f[1]), 10, 64)
				return n
			}
			continue
		}
		if string(f[0]) != prefix || i+1 >= len(lines) {
			continue
		}
		vals := bytes.Fields(lines[i+1])
		for k, fn := range f {
			if string(fn) == name && k < len(vals) {
				n, _ := strconv.ParseUint(string(vals[k]), 10, 64)
				return n
			}
		}
		return 0
	}
	return 0
}

// UDPRcvbufErrors is the count of UDP datagrams (IPv4 and IPv6) the
// calling thread's network namespace dropped because a socket's receive
// buffer was full: bytes that crossed the wire but no application read.
func UDPRcvbufErrors() (uint64, error) {
	b4, err := os.ReadFile(ProcNet("snmp"))
	if err != nil {
		return 0, err
	}
	n := SNMPValue(b4, "Udp:", "RcvbufErrors")
	if b6, err := os.ReadFile(ProcNet("snmp6")); err == nil { // absent without IPv6
		n += SNMPValue(b6, "", "Udp6RcvbufErrors")
	}
	return n, nil
}
