package survey

import (
	"bufio"
	"encoding/gob"
	"fmt"
	"io"
	"net/netip"
	"os"
)

// heldStore keeps the probe records finished while resolution still runs
// (their domains and resolution paths are final only when it ends): the
// first heldInMemory in memory, the rest spilled to a temporary file, so
// a long list neither grows the memory nor pauses probing. Without a
// temporary file it keeps them all in memory and probing pauses at MaxHeld.
type heldStore struct {
	mem   []heldRecord
	f     *os.File
	w     *bufio.Writer
	enc   *gob.Encoder
	n     int   // spilled
	err   error // the temporary file failed: memory only from then on
	noTmp bool
}

const heldInMemory = 1024

// heldLine is a spilled heldRecord.
type heldLine struct {
	Addr  netip.Addr  `json:"addr"`
	AI    int32       `json:"ai"`
	PI    uint8       `json:"pi"`
	Valid []bool      `json:"valid"`
	Rec   ProbeRecord `json:"rec"`
}

func (h *heldStore) add(hr heldRecord) {
	inMem := heldInMemory
	if testHeldInMemory > 0 {
		inMem = testHeldInMemory
	}
	if len(h.mem) < inMem || h.err != nil || h.noTmp {
		h.mem = append(h.mem, hr)
		return
	}
	if h.f == nil {
		f, err := unlinkedTemp("mptester-survey-held-*.jsonl")
		if err != nil {
			h.err = err
			h.mem = append(h.mem, hr)
			return
		}
		h.f, h.w = f, bufio.NewWriterSize(f, 64<<10)
		h.enc = gob.NewEncoder(h.w)
	}
	// gob, not JSON: a survey holds most of its records when resolution
	// is long (all of them at 1M), and JSON's reflection was a fifth of
	// the resolution's CPU in BenchmarkResolve10K.
	if err := h.enc.Encode(heldLine{Addr: hr.t.addr, AI: hr.t.ai, PI: hr.t.pi, Valid: hr.valid, Rec: hr.rec}); err != nil {
		h.err = err
		h.mem = append(h.mem, hr)
		return
	}
	h.n++
}

// capped says the records cannot be spilled: MaxHeld caps those in memory.
func (h *heldStore) capped() bool { return h.err != nil || h.noTmp }

// drain calls fn for every held record, the spilled ones read back in
// order, and empties the store.
func (h *heldStore) drain(fn func(heldRecord)) error {
	mem, f, w, n := h.mem, h.f, h.w, h.n
	*h = heldStore{noTmp: h.noTmp}
	for _, hr := range mem {
		fn(hr)
	}
	if f == nil {
		return nil
	}
	defer closeTemp(f)
	if err := w.Flush(); err != nil {
		return fmt.Errorf("held probe records: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("held probe records: %w", err)
	}
	dec := gob.NewDecoder(bufio.NewReaderSize(f, 64<<10))
	for read := range n {
		var l heldLine
		if err := dec.Decode(&l); err != nil {
			return fmt.Errorf("held probe records: read %d of %d back: %w", read, n, err)
		}
		if l.Rec.RTTsMs == nil {
			l.Rec.RTTsMs = []float64{} // gob leaves out empty slices; the record says []
		}
		fn(heldRecord{t: target{addr: l.Addr, ai: l.AI, pi: l.PI}, rec: l.Rec, valid: l.Valid})
	}
	return nil
}
