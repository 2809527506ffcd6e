package transport

import (
	"sync"

	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"
)

// ecnTrace follows what quic-go says of ECN on one connection: its
// validation state (recovery:ecn_state_updated, RFC 9000 Appendix A.4),
// the CE counts in the peer's ACK frames and the CE marks on the packets
// that arrived. quic-go exposes them only as qlog events; every other
// event is dropped at once.
type ecnTrace struct {
	mu      sync.Mutex
	state   qlog.ECNState
	counted bool      // an ACK frame from the peer carried ECN counts
	ceAcked [3]uint64 // the largest ECN-CE count per packet number space
	ceRecv  uint64
}

func (e *ecnTrace) AddProducer() qlogwriter.Recorder { return e }

func (e *ecnTrace) Close() error { return nil }

func (e *ecnTrace) RecordEvent(ev qlogwriter.Event) {
	switch ev := ev.(type) {
	case qlog.ECNStateUpdated:
		e.mu.Lock()
		e.state = ev.State
		e.mu.Unlock()
	case qlog.PacketReceived:
		space := spaceOf(ev.Header.PacketType)
		var ce uint64
		counted := false
		for _, f := range ev.Frames {
			if ack, ok := f.Frame.(*qlog.AckFrame); ok {
				ce = max(ce, ack.ECNCE)
				counted = counted || ack.ECT0+ack.ECT1+ack.ECNCE > 0
			}
		}
		if !counted && ev.ECN != qlog.ECNCE {
			return
		}
		e.mu.Lock()
		e.counted = e.counted || counted
		// ECN counts are cumulative per space; an ACK that arrives
		// reordered carries an older, smaller count.
		e.ceAcked[space] = max(e.ceAcked[space], ce)
		if ev.ECN == qlog.ECNCE {
			e.ceRecv++
		}
		e.mu.Unlock()
	}
}

// spaceOf is the packet number space a packet of this type acknowledges
// in (0-RTT and 1-RTT share the application space).
func spaceOf(t qlog.PacketType) int {
	switch t {
	case qlog.PacketTypeInitial:
		return 0
	case qlog.PacketTypeHandshake:
		return 1
	}
	return 2
}

// stats names quic-go's state as mpquic's paths do: a failure while no
// ACK from the peer ever carried ECN counts is a path that bleaches the
// field (told from the ACKs themselves, not from quic-go's wording of the
// failure); every other failure (counts too high, too low, decreasing,
// all testing packets lost, mangling) says the field was changed.
func (e *ecnTrace) stats() *QUICECN {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := &QUICECN{CESent: e.ceAcked[0] + e.ceAcked[1] + e.ceAcked[2], CEReceived: e.ceRecv}
	switch e.state {
	case "":
		s.ECN = "not-tried"
	case qlog.ECNStateCapable:
		s.ECN = "validated"
	case qlog.ECNStateFailed:
		s.ECN = "mangled"
		if !e.counted {
			s.ECN = "bleached"
		}
	default: // testing, unknown: marked packets sent, no verdict yet
		s.ECN = "testing"
	}
	return s
}
