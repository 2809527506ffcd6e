package transport

import (
	"testing"

	"github.com/quic-go/quic-go/qlog"
)

func ackIn(t qlog.PacketType, ecn qlog.ECN, ect0, ce uint64) qlog.PacketReceived {
	return qlog.PacketReceived{Header: qlog.PacketHeader{PacketType: t}, ECN: ecn,
		Frames: []qlog.Frame{{Frame: &qlog.PingFrame{}}, {Frame: &qlog.AckFrame{ECT0: ect0, ECNCE: ce}}}}
}

// TestECNTrace: quic-go's ECN events named as mpquic names its paths'
// states, CE counts as the largest per packet number space (an ACK that
// arrives late carries a smaller count), CE-marked arrivals counted.
func TestECNTrace(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []qlog.PacketReceived
		state  qlog.ECNState
		want   QUICECN
	}{
		{name: "no events", want: QUICECN{ECN: "not-tried"}},
		{name: "testing", state: qlog.ECNStateTesting, want: QUICECN{ECN: "testing"}},
		{name: "unknown is still testing", state: qlog.ECNStateUnknown, want: QUICECN{ECN: "testing"}},
		{name: "validated with CE", state: qlog.ECNStateCapable,
			events: []qlog.PacketReceived{ackIn(qlog.PacketTypeInitial, qlog.ECT0, 2, 1), ackIn(qlog.PacketType1RTT, qlog.ECNCE, 10, 3),
				ackIn(qlog.PacketType1RTT, qlog.ECT0, 9, 2), ackIn(qlog.PacketType1RTT, qlog.ECNCE, 20, 5)},
			want: QUICECN{ECN: "validated", CESent: 6, CEReceived: 2}},
		{name: "failed without counts is bleached", state: qlog.ECNStateFailed,
			events: []qlog.PacketReceived{ackIn(qlog.PacketType1RTT, qlog.ECTNot, 0, 0)},
			want:   QUICECN{ECN: "bleached"}},
		{name: "failed with counts is mangled", state: qlog.ECNStateFailed,
			events: []qlog.PacketReceived{ackIn(qlog.PacketType1RTT, qlog.ECTNot, 4, 0)},
			want:   QUICECN{ECN: "mangled"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &ecnTrace{}
			r := e.AddProducer()
			r.RecordEvent(qlog.PacketSent{})
			for _, ev := range tc.events {
				r.RecordEvent(ev)
			}
			if tc.state != "" {
				r.RecordEvent(qlog.ECNStateUpdated{State: tc.state})
			}
			if got := *e.stats(); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
