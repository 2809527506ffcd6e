package survey

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/mptester/mptester/probe"
)

// synProber sends raw SYNs (hping3 -S) from a raw socket bound to the path
// and matches SYN-ACK and RST replies in one receive loop per socket. The
// kernel has no socket for these connections, so it answers every SYN-ACK
// with a RST itself: no half-open connection is left on the server.
type synProber struct {
	path  probe.Path
	mu    sync.Mutex
	socks map[probe.Family]*synSock
	port  atomic.Uint32
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

type synSock struct {
	conn *net.IPConn
	src  netip.Addr
	dmx  *demux[synKey]
}

func newSynProber(_ context.Context, p probe.Path, _ ProberOptions) (Prober, error) {
	s := &synProber{path: p, socks: map[probe.Family]*synSock{}}
	s.port.Store(rand.Uint32N(synPortCount))
	return s, nil
}

func (s *synProber) sock(ctx context.Context, f probe.Family) (*synSock, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.socks[f]; ss != nil {
		return ss, nil
	}
	conn, src, err := probe.ListenRaw(ctx, s.path, f, "tcp")
	if err != nil {
		return nil, fmt.Errorf("open raw TCP socket on %s (needs root or CAP_NET_RAW; use --method tcp-connect otherwise): %w", s.path.Name, err)
	}
	ss := &synSock{conn: conn, src: src, dmx: newDemux[synKey]()}
	enableRxTimestamps(ss.conn)
	s.socks[f] = ss
	go ss.recvLoop()
	return ss, nil
}

func (ss *synSock) recvLoop() {
	buf, oob := make([]byte, 1500), make([]byte, oobSize)
	var tcp layers.TCP
	for {
		pkt, a, at, err := readStamped(ss.conn, buf, oob)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			return // closed
		}
		if len(pkt) < 20 {
			continue
		}
		if err := tcp.DecodeFromBytes(pkt, gopacket.NilDecodeFeedback); err != nil {
			continue
		}
		k := synKey{addr: a, dport: uint16(tcp.SrcPort), sport: uint16(tcp.DstPort)}
		ss.dmx.deliver(k, synReplyMsg{syn: tcp.SYN, ack: tcp.ACK, rst: tcp.RST, ackNum: tcp.Ack}, at)
	}
}

type synReplyMsg struct {
	syn, ack, rst bool
	ackNum        uint32
}

func (s *synProber) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for f, ss := range s.socks {
		ss.conn.Close()
		delete(s.socks, f)
	}
	return nil
}

func (s *synProber) Probe(ctx context.Context, t Target) Result {
	return resultWithin(ctx, s.Start(ctx, t))
}

// Start sends one SYN and returns at once.
func (s *synProber) Start(ctx context.Context, t Target) Pending {
	f := probe.FamilyOf(t.Addr)
	ss, err := s.sock(ctx, f)
	if err != nil {
		return donePending{Status: ProbeError, Err: err}
	}
	dst := t.Addr.Unmap()
	seq := rand.Uint32()
	var w *waiter
	var k synKey
	for range 8 { // find a free source port for this destination
		sport := uint16(synPortBase + s.port.Add(1)%synPortCount)
		k = synKey{addr: dst, dport: uint16(t.Port), sport: sport}
		var ok bool
		if w, ok = ss.dmx.register(k, synCheck(seq)); ok {
			break
		}
	}
	if w == nil {
		return donePending{Status: ProbeError, Err: fmt.Errorf("no free source port towards %s", dst)}
	}
	done := func() { ss.dmx.unregister(k) }
	pkt, err := buildSYN(ss.src, dst, k.sport, k.dport, seq)
	if err != nil {
		done()
		return donePending{Status: ProbeError, Err: err}
	}
	sent := sentNow()
	if _, err := ss.conn.WriteToIP(pkt, &net.IPAddr{IP: dst.AsSlice()}); err != nil {
		done()
		return donePending{Status: classifyErr(err), Err: fmt.Errorf("send SYN: %w", err)}
	}
	return &replyPending{w: w, sent: sent, bytes: len(pkt) + ipHeader(dst), done: done}
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
