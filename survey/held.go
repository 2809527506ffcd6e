package survey

import (
	"net/netip"

	"github.com/mptester/mptester/survey/internal/spill"
)

// heldStore keeps the probe records finished while resolution still runs
// (their domains and resolution paths are final only when it ends): the
// first heldInMemory in memory, the rest spilled to a temporary file
// (spill.Queue), so a long list neither grows the memory nor pauses
// probing. Without a temporary file it keeps them all in memory and
// probing pauses at MaxHeld.
type heldStore struct {
	q spill.Queue[heldLine]
}

const heldInMemory = 1024

// heldLine is a heldRecord as the queue keeps it (gob, for the spilled
// ones, wants exported fields).
type heldLine struct {
	Addr  netip.Addr  `json:"addr"`
	AI    int32       `json:"ai"`
	PI    uint8       `json:"pi"`
	Valid []bool      `json:"valid"`
	Rec   ProbeRecord `json:"rec"`
}

// newHeldStore makes a store that spills unless noFile.
func newHeldStore(noFile bool) heldStore {
	return heldStore{q: spill.Queue[heldLine]{InMemory: heldInMemory, NoFile: noFile}}
}

func (h *heldStore) add(hr heldRecord) {
	h.q.Add(heldLine{Addr: hr.t.addr, AI: hr.t.ai, PI: hr.t.pi, Valid: hr.valid, Rec: hr.rec})
}

// capped says the records cannot be spilled: MaxHeld caps those in memory.
func (h *heldStore) capped() bool { return h.q.Capped() }

// inMemory is how many records are in memory.
func (h *heldStore) inMemory() int { return h.q.InMemoryLen() }

// drain calls fn for every held record, the spilled ones read back in
// order, and empties the store.
func (h *heldStore) drain(fn func(heldRecord)) error {
	return h.q.Drain(func(l heldLine, spilled bool) {
		if spilled && l.Rec.RTTsMs == nil {
			l.Rec.RTTsMs = []float64{} // gob leaves out empty slices; the record says []
		}
		fn(heldRecord{t: target{addr: l.Addr, ai: l.AI, pi: l.PI}, rec: l.Rec, valid: l.Valid})
	})
}
