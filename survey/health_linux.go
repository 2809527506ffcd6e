package survey

import (
	"bytes"
	"os"
	"strconv"

	"github.com/mptester/mptester/internal/linkstats"
)

// procHost reads the host's input backlog drops (the second column of
// /proc/net/softnet_stat, one line per CPU: packets the kernel dropped
// because its backlog queue was full), CPU time (/proc/stat), the probe
// paths' interface queue drops (netlink) and the IP layer's output
// discards (/proc/net/snmp, snmp6).
//
// Output drops are the ones a survey cannot see otherwise: a raw socket's
// sendmsg reports success when the interface's transmit ring (a TUN's
// queue, a NIC's) is full and the probe is dropped, and, unless the socket
// asked for IP_RECVERR, also when the qdisc drops it (the kernel counts it
// as an IP OutDiscard). In the lab under load the emulator reading the
// client's TUN falls behind, its 500-packet queue overflows and ~1% of
// count-1 probes never leave: each one a responsive target reported
// unresponsive with status ok (docs/benchmarks.md).
type procHost struct {
	buf                  []byte
	ifaces               []string
	links                []linkstats.Counters
	softnet, snmp, snmp6 string // paths, resolved once: sample allocates nothing
}

func newHostCounters(ifaces []string) hostCounters {
	p := &procHost{buf: make([]byte, 0, 8192), ifaces: ifaces, links: make([]linkstats.Counters, len(ifaces)),
		softnet: linkstats.ProcNet("softnet_stat"), snmp: linkstats.ProcNet("snmp"), snmp6: linkstats.ProcNet("snmp6")}
	if _, err := os.Stat(p.softnet); err != nil {
		return nil
	}
	return p
}

func (p *procHost) sample() (hostSample, bool) {
	var s hostSample
	b, ok := p.read(p.softnet)
	if !ok {
		return s, false
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		f := bytes.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, err := strconv.ParseUint(string(f[1]), 16, 64)
		if err != nil {
			return s, false
		}
		s.drops += n
	}
	s.ok = true
	if len(p.ifaces) > 0 && linkstats.Read(p.ifaces, p.links, nil) == nil {
		for _, c := range p.links {
			s.ifDrops += c.QueueDrops()
		}
	}
	if b, ok := p.read(p.snmp); ok {
		s.outDrops += linkstats.SNMPValue(b, "Ip:", "OutDiscards")
	}
	if b, ok := p.read(p.snmp6); ok {
		s.outDrops += linkstats.SNMPValue(b, "", "Ip6OutDiscards")
	}
	if b, ok := p.read("/proc/stat"); ok {
		line, _, _ := bytes.Cut(b, []byte("\n"))
		f := bytes.Fields(line)
		if len(f) >= 5 && string(f[0]) == "cpu" {
			for i, v := range f[1:] {
				n, err := strconv.ParseUint(string(v), 10, 64)
				if err != nil {
					break
				}
				s.all += n
				if i != 3 && i != 4 { // idle, iowait
					s.busy += n
				}
			}
			s.hasCPU = true
		}
	}
	return s, true
}

func (p *procHost) read(name string) ([]byte, bool) {
	f, err := os.Open(name)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	p.buf = p.buf[:0]
	for {
		if len(p.buf) == cap(p.buf) {
			p.buf = append(p.buf, 0)[:len(p.buf)]
		}
		n, err := f.Read(p.buf[len(p.buf):cap(p.buf)])
		p.buf = p.buf[:len(p.buf)+n]
		if err != nil || n == 0 {
			return p.buf, true
		}
	}
}
