package survey

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/mptester/mptester/probe"
)

// synProber sends raw SYNs (hping3 -S) from a raw socket bound to the path
// (rawProber) and matches SYN-ACK and RST replies. The kernel has no socket
// for these connections, so it answers every SYN-ACK with a RST itself: no
// half-open connection is left on the server.
type synProber struct {
	rawProber[synKey]
	port atomic.Uint32
}

// Source ports come from above the default ephemeral range (32768-60999)
// so they do not collide with the host's own connections.
const (
	synPortBase  = 61000
	synPortCount = 65535 - synPortBase
)

type synKey struct {
	addr         netip.Addr
	dport, sport uint16
}

func newSynProber(_ context.Context, p probe.Path, opts ProberOptions) (Prober, error) {
	s := &synProber{rawProber: rawProber[synKey]{path: p, proto: "tcp", health: opts.health,
		hint: "needs root or CAP_NET_RAW; use --method tcp-connect otherwise", parser: synParser}}
	s.port.Store(rand.Uint32N(synPortCount))
	return s, nil
}

// synParser decodes TCP headers (the raw socket sees every TCP packet to
// the host) into the key of the SYN they may answer.
func synParser(probe.Family) func([]byte, netip.Addr) (synKey, any, bool) {
	var tcp layers.TCP // reused: one parser per receive loop
	return func(pkt []byte, from netip.Addr) (synKey, any, bool) {
		if len(pkt) < 20 || tcp.DecodeFromBytes(pkt, gopacket.NilDecodeFeedback) != nil {
			return synKey{}, nil, false
		}
		k := synKey{addr: from, dport: uint16(tcp.SrcPort), sport: uint16(tcp.DstPort)}
		return k, synReplyMsg{syn: tcp.SYN, ack: tcp.ACK, rst: tcp.RST, ackNum: tcp.Ack}, true
	}
}

type synReplyMsg struct {
	syn, ack, rst bool
	ackNum        uint32
}

func (s *synProber) Probe(ctx context.Context, t Target) Result {
	return resultWithin(ctx, s.Start(ctx, t))
}

// Start sends one SYN and returns at once.
func (s *synProber) Start(ctx context.Context, t Target) Pending {
	dst := t.Addr.Unmap()
	seq := rand.Uint32()
	return s.send(ctx, dst, rawPacket[synKey]{
		next: func() synKey { // the next source port for this destination
			return synKey{addr: dst, dport: uint16(t.Port), sport: uint16(synPortBase + s.port.Add(1)%synPortCount)}
		},
		check: synCheck(seq),
		build: func(src netip.Addr, k synKey) ([]byte, error) { return buildSYN(src, dst, k.sport, k.dport, seq) },
		// The kernel knows no connection for a SYN-ACK and resets it.
		replyBytes: func(k AnswerKind) int {
			if k == AnswerSynAck {
				return ipTCPHeader(dst)
			}
			return 0
		},
		keyName: "source port", pktName: "SYN",
	})
}

// synCheck accepts a SYN-ACK or RST acknowledging our sequence number.
func synCheck(seq uint32) func(any) (AnswerKind, bool) {
	return func(m any) (AnswerKind, bool) {
		r := m.(synReplyMsg)
		if !r.ack || r.ackNum != seq+1 {
			return "", false
		}
		switch {
		case r.rst:
			return AnswerRST, true
		case r.syn:
			return AnswerSynAck, true
		}
		return "", false
	}
}

// buildSYN serializes a TCP SYN with an MSS option; the checksum covers the
// pseudo-header (the kernel fills the IP header of a raw TCP socket).
func buildSYN(src, dst netip.Addr, sport, dport uint16, seq uint32) ([]byte, error) {
	mss := make([]byte, 2)
	binary.BigEndian.PutUint16(mss, 1460)
	tcp := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: layers.TCPPort(dport), Seq: seq, SYN: true,
		Window: 64240, Options: []layers.TCPOption{{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: mss}}}
	var nl gopacket.NetworkLayer
	if dst.Is4() {
		nl = &layers.IPv4{SrcIP: src.AsSlice(), DstIP: dst.AsSlice(), Protocol: layers.IPProtocolTCP}
	} else {
		nl = &layers.IPv6{SrcIP: src.AsSlice(), DstIP: dst.AsSlice(), NextHeader: layers.IPProtocolTCP}
	}
	if err := tcp.SetNetworkLayerForChecksum(nl); err != nil {
		return nil, err
	}
	buf := serializeBufs.Get().(gopacket.SerializeBuffer)
	defer serializeBufs.Put(buf)
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true}, tcp); err != nil {
		return nil, fmt.Errorf("build SYN: %w", err)
	}
	return append([]byte(nil), buf.Bytes()...), nil
}

// serializeBufs recycles gopacket buffers: at thousands of SYNs per second
// a fresh one per packet was the survey's largest source of garbage.
var serializeBufs = sync.Pool{New: func() any { return gopacket.NewSerializeBuffer() }}
