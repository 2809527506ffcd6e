// Package capture records the packets of a run's test connections on each
// interface (AF_PACKET on Linux, through gopacket's pure-Go afpacket):
// per interface and per flow, when the first and last data packet left,
// the last packet of any kind left and arrived, and the IP bytes each
// way. That is what a handover's times are made of (000 §IV-A: first data
// packet on cellular, last packet sent / received on Wi-Fi; 001's per-
// interface view of a connection), measured where the packets really go
// rather than from socket counters, which count retransmissions the
// kernel never got out of a downed interface. Optionally each interface's
// matching packets are written to DIR/IFACE.pcap.
package capture

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/mptester/mptester/probe"
)

// Flow selects the packets of one transport: its protocol ("tcp" or
// "udp") to or from the server's address and port.
type Flow struct {
	Proto  string         `json:"proto"`
	Server netip.AddrPort `json:"server"`
}

// Options of a capture.
type Options struct {
	Ifaces []string
	Flows  []Flow
	// PcapDir, when set, receives IFACE.pcap per interface (raw IP link
	// type, nanosecond timestamps) with the matching packets.
	PcapDir string
	// Snaplen bytes of each packet are kept in the pcap (0: 256, headers
	// and a little payload).
	Snaplen int
}

// Activity of one flow on one interface. Out is from this host, In to it.
type Activity struct {
	FirstDataOut time.Time `json:"first_data_out,omitzero"`
	LastDataOut  time.Time `json:"last_data_out,omitzero"`
	LastOut      time.Time `json:"last_out,omitzero"`
	FirstDataIn  time.Time `json:"first_data_in,omitzero"`
	LastDataIn   time.Time `json:"last_data_in,omitzero"`
	LastIn       time.Time `json:"last_in,omitzero"`
	PacketsOut   uint64    `json:"packets_out"`
	PacketsIn    uint64    `json:"packets_in"`
	BytesOut     uint64    `json:"bytes_out"` // IP packet bytes
	BytesIn      uint64    `json:"bytes_in"`
}

// add counts one packet, out (from this host) or in.
func (a *Activity) add(out, data bool, length int, ts time.Time) {
	packets, bytes, last, first, lastData := &a.PacketsIn, &a.BytesIn, &a.LastIn, &a.FirstDataIn, &a.LastDataIn
	if out {
		packets, bytes, last, first, lastData = &a.PacketsOut, &a.BytesOut, &a.LastOut, &a.FirstDataOut, &a.LastDataOut
	}
	*packets++
	*bytes += uint64(length)
	*last = ts
	if data {
		if first.IsZero() {
			*first = ts
		}
		*lastData = ts
	}
}

// FlowActivity is a flow's activity on one interface.
type FlowActivity struct {
	Iface string `json:"iface"`
	Flow
	Activity
}

// IfaceStats: what the capture socket of an interface saw and lost.
type IfaceStats struct {
	Iface   string `json:"iface"`
	Packets uint64 `json:"packets"` // every packet the socket read
	Matched uint64 `json:"matched"` // of them, the flows'
	// Drops: packets the kernel dropped because the capture's ring was
	// full (PACKET_STATISTICS).
	Drops uint64 `json:"drops"`
	Pcap  string `json:"pcap,omitempty"`
	Error string `json:"error,omitempty"`
	// WentDown: the interface went down during the capture, which ended
	// there for it.
	WentDown bool `json:"went_down,omitempty"`
	// CPU time of the interface's reader thread (read, decode, match,
	// pcap), the capture's own cost.
	CPU time.Duration `json:"cpu_ns"`
}

// Result of a capture.
type Result struct {
	Flows  []FlowActivity `json:"flows"`
	Ifaces []IfaceStats   `json:"ifaces"`
}

// Of returns flow f's activity on iface (zero if none).
func (r Result) Of(iface string, f Flow) Activity {
	for _, a := range r.Flows {
		if a.Iface == iface && a.Flow == f {
			return a.Activity
		}
	}
	return Activity{}
}

// Errors a caller maps to exit codes.
var (
	// ErrPermission: no CAP_NET_RAW.
	ErrPermission = errors.New("packet capture needs CAP_NET_RAW: run as root or grant it with 'sudo setcap cap_net_raw+ep $(command -v mptester)'")
	// ErrUnsupported: not Linux.
	ErrUnsupported = fmt.Errorf("packet capture needs Linux (AF_PACKET): %w", probe.ErrUnsupported)
)

// Check opens and closes a capture on every interface: a command finds a
// missing permission before it writes anything.
func Check(ctx context.Context, ifaces []string) error {
	c, err := Start(ctx, Options{Ifaces: ifaces})
	if err != nil {
		return err
	}
	c.Stop()
	return nil
}

// accounter matches packets to flows and keeps their activity; shared by
// every interface's reader.
type accounter struct {
	flows []Flow
	mu    sync.Mutex
	acts  map[key]*Activity
	order []key

	p4, p6  *gopacket.DecodingLayerParser
	ip4     layers.IPv4
	ip6     layers.IPv6
	tcp     layers.TCP
	udp     layers.UDP
	payload gopacket.Payload
	decoded []gopacket.LayerType
}

type key struct {
	iface string
	flow  int
}

func newAccounter(flows []Flow) *accounter {
	a := &accounter{flows: flows, acts: map[key]*Activity{}}
	a.p4 = gopacket.NewDecodingLayerParser(layers.LayerTypeIPv4, &a.ip4, &a.tcp, &a.udp, &a.payload)
	a.p6 = gopacket.NewDecodingLayerParser(layers.LayerTypeIPv6, &a.ip6, &a.tcp, &a.udp, &a.payload)
	a.p4.IgnoreUnsupported, a.p6.IgnoreUnsupported = true, true
	return a
}

// account decodes one IP packet seen on iface at ts and adds it to its
// flow; it reports whether the packet belonged to one. Not safe for
// concurrent use with itself (callers hold mu).
func (a *accounter) account(iface string, pkt []byte, length int, ts time.Time) bool {
	if len(pkt) == 0 {
		return false
	}
	var p *gopacket.DecodingLayerParser
	switch pkt[0] >> 4 {
	case 4:
		p = a.p4
	case 6:
		p = a.p6
	default:
		return false
	}
	a.decoded = a.decoded[:0]
	_ = p.DecodeLayers(pkt, &a.decoded) // a truncated packet keeps the layers decoded so far
	var src, dst netip.Addr
	var proto string
	var sport, dport uint16
	var data bool
	for _, lt := range a.decoded {
		switch lt {
		case layers.LayerTypeIPv4:
			src, _ = netip.AddrFromSlice(a.ip4.SrcIP.To4())
			dst, _ = netip.AddrFromSlice(a.ip4.DstIP.To4())
		case layers.LayerTypeIPv6:
			src, _ = netip.AddrFromSlice(a.ip6.SrcIP.To16())
			dst, _ = netip.AddrFromSlice(a.ip6.DstIP.To16())
			src, dst = src.Unmap(), dst.Unmap()
		case layers.LayerTypeTCP:
			proto, sport, dport = "tcp", uint16(a.tcp.SrcPort), uint16(a.tcp.DstPort)
			data = len(a.tcp.Payload) > 0
		case layers.LayerTypeUDP:
			proto, sport, dport = "udp", uint16(a.udp.SrcPort), uint16(a.udp.DstPort)
			data = true // every QUIC datagram carries frames
		}
	}
	if proto == "" {
		return false
	}
	for i, f := range a.flows {
		if f.Proto != proto {
			continue
		}
		var out bool
		switch {
		case dst == f.Server.Addr() && dport == f.Server.Port():
			out = true
		case src == f.Server.Addr() && sport == f.Server.Port():
		default:
			continue
		}
		k := key{iface, i}
		act := a.acts[k]
		if act == nil {
			act = &Activity{}
			a.acts[k] = act
			a.order = append(a.order, k)
		}
		act.add(out, data, length, ts)
		return true
	}
	return false
}

func (a *accounter) result() []FlowActivity {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]FlowActivity, 0, len(a.order))
	for _, k := range a.order {
		out = append(out, FlowActivity{Iface: k.iface, Flow: a.flows[k.flow], Activity: *a.acts[k]})
	}
	return out
}
