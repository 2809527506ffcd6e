package interop

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/mptester/mptester/mpquic"
)

// The zerortt case: two connections one after the other, the second
// resuming the first's session and sending its request in 0-RTT (RFC
// 9001 §4.6.1), which the server accepts.
func setupZeroRTT(o *opts) {
	o.files = files(1<<10, 32<<10)
	o.perConn, o.resume, o.zeroRTT = true, true, true
}

// checkZeroRTT: 0-RTT packets from the client on the wire (the relay),
// mpquic's side counts them sent and accepted (client) or opened
// (server), and the peer's own record says so: quic-go's Used0RTT, or
// 0-RTT packets in ngtcp2's qlog and no rejection in its log.
func checkZeroRTT(t *testing.T, r *run) {
	t.Helper()
	if len(r.conns) != 2 {
		t.Fatalf("%d connections, want 2", len(r.conns))
	}
	n, bytes := r.relay.count(func(s seen) bool { return s.dir == toServer && s.zeroRTT > 0 })
	if n == 0 {
		t.Error("no 0-RTT packet from the client on the wire")
	}
	first, second := r.conns[0].EarlyData(), r.conns[1].EarlyData()
	if first.Offered {
		t.Errorf("the first connection had 0-RTT: %+v", first)
	}
	switch r.role {
	case mpquicClient:
		if !second.Accepted || second.PacketsSent == 0 {
			t.Errorf("mpquic's client: %+v, want 0-RTT packets sent and accepted", second)
		}
	case mpquicServer:
		if !second.Accepted || second.PacketsReceived == 0 {
			t.Errorf("mpquic's server: %+v, want 0-RTT packets opened", second)
		}
	}
	t.Logf("0-RTT: %d datagrams (%d bytes) from the client; mpquic %+v", n, bytes, second)
	if r.peer.name() == "quic-go" {
		for i := 0; i < 200; i++ { // its handshake may complete a moment later
			r.peerEv.mu.Lock()
			early := r.peerEv.early
			r.peerEv.mu.Unlock()
			if early > 0 {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Error("quic-go says no connection used 0-RTT")
		return
	}
	log := r.peerEv.qlogText()
	if !strings.Contains(log, `"packet_type":"0RTT"`) {
		t.Errorf("no 0-RTT packet in %s's qlog", r.peer.name())
	}
	if strings.Contains(log, "Early data was rejected") {
		t.Errorf("%s says early data was rejected", r.peer.name())
	}
}

// zeroRTTPackets counts the 0-RTT packets among a datagram's coalesced
// long-header packets (RFC 9000 §12.2, §17.2; QUIC v1's type bits).
func zeroRTTPackets(b []byte) int {
	n := 0
	for len(b) > 7 && b[0]&0x80 != 0 {
		if binary.BigEndian.Uint32(b[1:5]) != 1 {
			return n
		}
		typ := (b[0] >> 4) & 3
		i := 5
		for range 2 { // DCID, SCID
			if i >= len(b) {
				return n
			}
			i += 1 + int(b[i])
		}
		if typ == 0 { // Initial: token
			l, k := varint(b[i:])
			if k == 0 {
				return n
			}
			i += k + int(l)
		}
		if typ == 3 || i > len(b) { // Retry: no length
			return n
		}
		l, k := varint(b[i:])
		if k == 0 || i+k+int(l) > len(b) {
			return n
		}
		if typ == 1 {
			n++
		}
		b = b[i+k+int(l):]
	}
	return n
}

func varint(b []byte) (uint64, int) {
	if len(b) == 0 {
		return 0, 0
	}
	k := 1 << (b[0] >> 6)
	if len(b) < k {
		return 0, 0
	}
	v := uint64(b[0] & 0x3f)
	for _, c := range b[1:k] {
		v = v<<8 | uint64(c)
	}
	return v, k
}

// checkV2: every long header on the wire carried version 2 (RFC 9369),
// and the peer says it spoke it.
func checkV2(t *testing.T, r *run) {
	t.Helper()
	checkVersion(t, r, mpquic.Version2)
	checkConnections(t, r, 1)
	r.peerEv.mu.Lock()
	v := r.peerEv.version
	r.peerEv.mu.Unlock()
	if v != mpquic.Version2 {
		t.Errorf("the peer says version 0x%x", v)
	}
}
