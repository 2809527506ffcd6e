package spill

import (
	"bufio"
	"encoding/gob"
	"fmt"
	"io"
	"os"
)

// Queue keeps items in arrival order: the first InMemory in memory, the
// rest gob-encoded to a temporary file, so a long run neither grows the
// memory nor pauses its producer. Without a temporary file (NoFile, or
// the file failed) it keeps them all in memory; Capped says so, and the
// caller bounds them. T must be gob-encodable.
type Queue[T any] struct {
	// InMemory is how many items stay in memory before the file; NoFile
	// keeps every item in memory. Set before the first Add.
	InMemory int
	NoFile   bool

	mem []T
	f   *os.File
	w   *bufio.Writer
	enc *gob.Encoder
	n   int   // spilled
	err error // the temporary file failed: memory only from then on
}

// Add appends item.
func (h *Queue[T]) Add(item T) {
	inMem := h.InMemory
	if TestQueueInMemory > 0 {
		inMem = TestQueueInMemory
	}
	if len(h.mem) < inMem || h.err != nil || h.NoFile {
		h.mem = append(h.mem, item)
		return
	}
	if h.f == nil {
		f, err := UnlinkedTemp("mptester-survey-held-*.jsonl")
		if err != nil {
			h.err = err
			h.mem = append(h.mem, item)
			return
		}
		h.f, h.w = f, bufio.NewWriterSize(f, 64<<10)
		h.enc = gob.NewEncoder(h.w)
	}
	// gob, not JSON: a survey holds most of its records when resolution
	// is long (all of them at 1M), and JSON's reflection was a fifth of
	// the resolution's CPU in BenchmarkResolve10K.
	if err := h.enc.Encode(item); err != nil {
		h.err = err
		h.mem = append(h.mem, item)
		return
	}
	h.n++
}

// InMemoryLen is how many items are in memory.
func (h *Queue[T]) InMemoryLen() int { return len(h.mem) }

// Capped says the items cannot be spilled: the caller caps those in
// memory.
func (h *Queue[T]) Capped() bool { return h.err != nil || h.NoFile }

// Drain calls fn for every item, the spilled ones read back in order
// (spilled true), and empties the queue (InMemory and NoFile stay).
func (h *Queue[T]) Drain(fn func(item T, spilled bool)) error {
	mem, f, w, n := h.mem, h.f, h.w, h.n
	*h = Queue[T]{InMemory: h.InMemory, NoFile: h.NoFile}
	for _, it := range mem {
		fn(it, false)
	}
	if f == nil {
		return nil
	}
	defer CloseTemp(f)
	if err := w.Flush(); err != nil {
		return fmt.Errorf("held probe records: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("held probe records: %w", err)
	}
	dec := gob.NewDecoder(bufio.NewReaderSize(f, 64<<10))
	for read := range n {
		var it T
		if err := dec.Decode(&it); err != nil {
			return fmt.Errorf("held probe records: read %d of %d back: %w", read, n, err)
		}
		fn(it, true)
	}
	return nil
}
