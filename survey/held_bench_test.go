package survey

import (
	"net/netip"
	"testing"
)

// BenchmarkHeldSpill holds 10,000 probe records past the in-memory few
// (spilled to the temporary file) and reads them back.
func BenchmarkHeldSpill(b *testing.B) {
	rec := ProbeRecord{Type: "probe", ProbePath: "wlan0", Address: netip.MustParseAddr("198.19.1.2"), Port: 443, Method: "tcp-syn",
		Sent: 1, Received: 1, RTTsMs: []float64{21.234}, Answer: AnswerSynAck, Answers: map[string]int{"syn-ack": 1}, Responsive: true, Bytes: 100}
	rec.ProbeStats = statsOf(rec.RTTsMs)
	for b.Loop() {
		h := newHeldStore(false)
		for i := range 10000 {
			h.add(heldRecord{t: target{addr: rec.Address, ai: int32(i), pi: 1}, rec: rec, valid: []bool{true, true}})
		}
		n := 0
		if err := h.drain(func(heldRecord) { n++ }); err != nil || n != 10000 {
			b.Fatal(err, n)
		}
	}
}
