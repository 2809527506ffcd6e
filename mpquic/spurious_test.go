package mpquic

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"
)

// holdOneConn is fault injection: the at-th full-size datagram it sends
// (past the handshake) leaves late after the others or, with late zero,
// never.
type holdOneConn struct {
	net.PacketConn
	at   int
	late time.Duration
	mu   sync.Mutex
	n    int
}

func (h *holdOneConn) WriteTo(b []byte, to net.Addr) (int, error) {
	mine := false
	if len(b) >= 1000 {
		h.mu.Lock()
		h.n++
		mine = h.n == h.at
		h.mu.Unlock()
	}
	if !mine {
		return h.PacketConn.WriteTo(b, to)
	}
	if h.late > 0 {
		p := append([]byte(nil), b...)
		time.AfterFunc(h.late, func() { h.PacketConn.WriteTo(p, to) })
	}
	return len(b), nil
}

// Ground truth for PathStats.SpuriousLosses: one datagram held back 100 ms
// (far past RFC 9002's 9/8 of a loopback RTT, with later packets
// acknowledged) is declared lost and then acknowledged: exactly one
// spurious loss. The same datagram dropped is a loss and no spurious one.
// The transfer is small: a datagram later than about 128 packet numbers
// would be decoded against the wrong window (RFC 9000 §17.1) and fail
// to open, an arrival nobody could acknowledge.
func TestSpuriousLossesAgainstPlanted(t *testing.T) {
	for _, c := range []struct {
		name string
		late time.Duration
		want uint64
	}{{"held back", 100 * time.Millisecond, 1}, {"dropped", 0, 0}} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			mp := newMPPair(t, ctx, &holdOneConn{PacketConn: udpLoopback(t), at: 20, late: c.late}, nil, nil)
			exchange(t, ctx, mp.open, testData(64<<10, 3))
			// The held datagram arrives 100 ms after it left and is
			// acknowledged at once (it fills a gap): past 300 ms it has
			// been; the dropped one had nothing to be late for.
			var st PathStats
			for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
				st = mp.c.PathStats()[0]
				if since := time.Since(start); since > time.Second || since > 300*time.Millisecond && st.SpuriousLosses >= c.want {
					break
				}
			}
			if st.PacketsLost < 1 || st.SpuriousLosses != c.want {
				t.Errorf("%d packets lost, %d of them spurious; want at least the planted one lost and %d spurious", st.PacketsLost, st.SpuriousLosses, c.want)
			}
		})
	}
}
