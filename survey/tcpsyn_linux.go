package survey

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"sync/atomic"

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

// synParser reads TCP headers (the raw socket sees every TCP packet to
// the host) into the key of the SYN they may answer.
func synParser(probe.Family) func([]byte, netip.Addr) (synKey, any, bool) {
	return func(pkt []byte, from netip.Addr) (synKey, any, bool) {
		h, ok := parseTCP(pkt)
		if !ok {
			return synKey{}, nil, false
		}
		k := synKey{addr: from, dport: h.sport, sport: h.dport}
		return k, synReplyMsg{syn: h.flags&tcpSYN != 0, ack: h.flags&tcpACK != 0, rst: h.flags&tcpRST != 0, ackNum: h.ack}, true
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
		build: func(b []byte, src netip.Addr, k synKey) []byte { return appendSYN(b, src, dst, k.sport, k.dport, seq) },
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
