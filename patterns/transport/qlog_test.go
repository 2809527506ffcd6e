package transport

import (
	"testing"

	"github.com/quic-go/quic-go/qlog"
)

// The queue-drop counter sums exactly the datagrams quic-go dropped for
// a full queue, and nothing it dropped for other reasons or merely logged.
func TestQueueDropsCounts(t *testing.T) {
	var d queueDrops
	r := teeTrace{&d}.AddProducer()
	for _, e := range []struct {
		ev   qlog.PacketDropped
		want bool
	}{
		{qlog.PacketDropped{Raw: qlog.RawInfo{Length: 1252}, Trigger: qlog.PacketDropDOSPrevention}, true},
		{qlog.PacketDropped{Raw: qlog.RawInfo{Length: 1200}, Trigger: qlog.PacketDropDuplicate}, false},
		{qlog.PacketDropped{Raw: qlog.RawInfo{Length: 1400}, Trigger: qlog.PacketDropDOSPrevention}, true},
		{qlog.PacketDropped{Raw: qlog.RawInfo{Length: 900}, Trigger: qlog.PacketDropPayloadDecryptError}, false},
	} {
		r.RecordEvent(e.ev)
	}
	r.RecordEvent(qlog.PacketReceived{Raw: qlog.RawInfo{Length: 1300}})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if p, b := d.packets.Load(), d.bytes.Load(); p != 2 || b != 1252+1400 {
		t.Errorf("counted %d packets, %d bytes; want 2, %d", p, b, 1252+1400)
	}
}
