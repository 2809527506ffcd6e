package spill

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
)

// Groups holds 4-byte entries grouped by a key index, each group in
// arrival order (the survey's: per address index, the domains that
// resolved to it). A top-1M list has millions of them (4 bytes each, and
// a slice per key growing by doubling: ~30 MB at 1M in the lab), so while
// they come they are appended as (key, entry) pairs, past groupsSpillAt
// pairs to an unlinked temporary file; Seal groups them by key, in
// memory for small sets, else into a second temporary file read with
// ReadAt. Callers serialise Add and Seal; Get and Each are safe once
// sealed.
type Groups struct {
	counts []uint32 // entries per key index
	pairs  []uint64 // key<<32 | entry, not spilled yet
	f      *os.File // spilled pairs
	w      *bufio.Writer
	spilt  int64 // pairs in f
	err    error

	sealed bool
	offs   []uint32 // after Seal: key i's entries are [offs[i], offs[i+1])
	grp    []uint32 // grouped entries in memory, or
	g      *os.File // grouped entries in a file, 4 bytes each
}

// groupsSpillAt is how many pairs (8 bytes each) stay in memory (512 KB).
const groupsSpillAt = 1 << 16

// groupsSortBuf is how many grouped entries one pass over the spilled
// pairs fills (1 MB, and as much again to write them).
const groupsSortBuf = 1 << 18

func (d *Groups) spillAt() (int, int) {
	if TestGroupsAt > 0 {
		return TestGroupsAt, TestGroupsAt
	}
	return groupsSpillAt, groupsSortBuf
}

// Add records entry e for key index ai.
func (d *Groups) Add(ai int32, e uint32) {
	for int(ai) >= len(d.counts) {
		d.counts = append(d.counts, 0)
	}
	d.counts[ai]++
	d.pairs = append(d.pairs, uint64(ai)<<32|uint64(e))
	if at, _ := d.spillAt(); len(d.pairs) >= at && d.err == nil {
		d.spill()
	}
}

func (d *Groups) spill() {
	if d.f == nil {
		f, err := UnlinkedTemp("mptester-survey-doms-*")
		if err != nil {
			d.err = err
			return
		}
		d.f, d.w = f, bufio.NewWriterSize(f, 64<<10)
	}
	b := make([]byte, 8*len(d.pairs))
	for i, p := range d.pairs {
		binary.LittleEndian.PutUint64(b[8*i:], p)
	}
	if _, err := d.w.Write(b); err != nil {
		d.err = err // seal fails: the file may hold part of them
		return
	}
	d.spilt += int64(len(d.pairs))
	d.pairs = d.pairs[:0]
}

// Sealed says Seal was called.
func (d *Groups) Sealed() bool { return d.sealed }

// Seal groups the entries by key; n is the number of keys.
func (d *Groups) Seal(n int) error {
	if d.sealed {
		return nil
	}
	d.sealed = true
	for len(d.counts) < n {
		d.counts = append(d.counts, 0)
	}
	d.offs = make([]uint32, n+1)
	for i, c := range d.counts {
		d.offs[i+1] = d.offs[i] + c
	}
	d.counts = nil
	fill := make([]uint32, n) // entries placed per address
	place := func(p uint64, lo, hi int, buf []uint32) {
		ai := int(p >> 32)
		if ai >= lo && ai < hi {
			buf[d.offs[ai]-d.offs[lo]+fill[ai]] = uint32(p)
			fill[ai]++
		}
	}
	if d.f != nil && d.err != nil {
		return fmt.Errorf("resolved domains: temporary file: %w", d.err)
	}
	if d.f == nil {
		d.grp = make([]uint32, d.offs[n])
		for _, p := range d.pairs {
			place(p, 0, n, d.grp)
		}
		d.pairs = nil
		return nil
	}
	defer func() { CloseTemp(d.f); d.f = nil }()
	if err := d.w.Flush(); err != nil {
		return fmt.Errorf("resolved domains: %w", err)
	}
	g, err := UnlinkedTemp("mptester-survey-domsg-*")
	if err != nil {
		return fmt.Errorf("resolved domains: %w", err)
	}
	d.g = g
	_, bufN := d.spillAt()
	var buf []uint32
	var out []byte
	for lo := 0; lo < n; {
		// Keys [lo, hi) fill at most bufN entries (one key at least,
		// whatever its count).
		hi := lo + 1
		for hi < n && d.offs[hi+1]-d.offs[lo] <= uint32(bufN) {
			hi++
		}
		size := int(d.offs[hi] - d.offs[lo])
		if cap(buf) < size {
			buf = make([]uint32, size)
		}
		buf = buf[:size]
		if _, err := d.f.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("resolved domains: %w", err)
		}
		br := bufio.NewReaderSize(d.f, 64<<10)
		var b [8]byte
		for range d.spilt {
			if _, err := io.ReadFull(br, b[:]); err != nil {
				return fmt.Errorf("resolved domains: read back: %w", err)
			}
			place(binary.LittleEndian.Uint64(b[:]), lo, hi, buf)
		}
		for _, p := range d.pairs {
			place(p, lo, hi, buf)
		}
		if cap(out) < 4*len(buf) {
			out = make([]byte, 4*len(buf))
		}
		out = out[:4*len(buf)]
		for i, e := range buf {
			binary.LittleEndian.PutUint32(out[4*i:], e)
		}
		if _, err := g.WriteAt(out, 4*int64(d.offs[lo])); err != nil {
			return fmt.Errorf("resolved domains: %w", err)
		}
		lo = hi
	}
	d.pairs = nil
	return nil
}

// Get returns key ai's entries (in buf when read from the file).
func (d *Groups) Get(ai int32, buf []uint32) []uint32 {
	lo, hi := d.offs[ai], d.offs[ai+1]
	if d.g == nil {
		return d.grp[lo:hi]
	}
	b := make([]byte, 4*(hi-lo))
	if _, err := d.g.ReadAt(b, 4*int64(lo)); err != nil {
		panic(fmt.Sprintf("survey: read resolved domains back: %v", err)) // our own open file failed
	}
	buf = buf[:0]
	for i := 0; i < len(b); i += 4 {
		buf = append(buf, binary.LittleEndian.Uint32(b[i:]))
	}
	return buf
}

// Each calls fn for every key index in order with its entries (valid
// during the call only).
func (d *Groups) Each(fn func(ai int32, doms []uint32)) {
	n := len(d.offs) - 1
	if d.g == nil {
		for i := range n {
			fn(int32(i), d.grp[d.offs[i]:d.offs[i+1]])
		}
		return
	}
	br := bufio.NewReaderSize(io.NewSectionReader(d.g, 0, 4*int64(d.offs[n])), 64<<10)
	var buf []uint32
	var b [4]byte
	for i := range n {
		buf = buf[:0]
		for range d.offs[i+1] - d.offs[i] {
			if _, err := io.ReadFull(br, b[:]); err != nil {
				panic(fmt.Sprintf("survey: read resolved domains back: %v", err))
			}
			buf = append(buf, binary.LittleEndian.Uint32(b[:]))
		}
		fn(int32(i), buf)
	}
}

// Close removes the temporary files.
func (d *Groups) Close() {
	if d.f != nil {
		CloseTemp(d.f)
	}
	if d.g != nil {
		CloseTemp(d.g)
	}
}
