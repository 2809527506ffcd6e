package survey

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"io"
	"os"
)

// DomainList is a ranked list held compactly (issue 18: a top-1M list as
// []Domain was ~45 MB of string headers and names, its duplicate check a
// map of another ~60 MB): per domain about 1 byte in memory (its name's
// length, and every markEvery names the offset reached; 4 bytes more for
// the rank only when ranks are not positions), the names in one byte
// buffer that moves to an unlinked temporary file once it passes
// spillNamesAt. Reads are safe from many goroutines once the list is
// built.
type DomainList struct {
	lens  []uint8        // length of name i; longName: see long
	long  map[int]uint32 // lengths of 255 or more (no DNS name is; only from NewDomainList)
	marks []uint32       // start offset of name i*markEvery in the name store
	ranks []uint32       // nil while every rank is its position (i+1), as in Tranco lists
	names nameStore
	set   *nameSet // built on demand (Index); nil otherwise
}

// markEvery spaces the offsets kept: finding a name's start adds at most
// markEvery-1 lengths (a 4-byte offset a domain was 3.9 MB at 1M).
const (
	markEvery = 64
	longName  = 255
)

// spillNamesAt is how many bytes of names stay in memory (about 50K
// Tranco names) before they all go to a temporary file.
const spillNamesAt = 1 << 20

// testSpillNamesAt, when > 0, replaces spillNamesAt (tests).
var testSpillNamesAt = 0

// NewDomainList copies ds into a compact list.
func NewDomainList(ds []Domain) *DomainList {
	l := &DomainList{lens: make([]uint8, 0, len(ds))}
	for _, d := range ds {
		l.add(d.Rank, []byte(d.Name))
	}
	l.names.done()
	return l
}

// Len is the number of domains.
func (l *DomainList) Len() int { return len(l.lens) }

// Rank of domain i.
func (l *DomainList) Rank(i int) int {
	if l.ranks == nil {
		return i + 1
	}
	return int(l.ranks[i])
}

// Name of domain i.
func (l *DomainList) Name(i int) string { return string(l.name(i, nil)) }

// At is domain i.
func (l *DomainList) At(i int) Domain { return Domain{Rank: l.Rank(i), Name: l.Name(i)} }

// Slice returns the list as []Domain.
func (l *DomainList) Slice() []Domain {
	out := make([]Domain, l.Len())
	for i := range out {
		out[i] = l.At(i)
	}
	return out
}

// Spilled says whether the names are in a temporary file.
func (l *DomainList) Spilled() bool { return l.names.f != nil }

// Close removes the temporary file, if any.
func (l *DomainList) Close() error {
	if l == nil {
		return nil
	}
	return l.names.close()
}

func (l *DomainList) length(i int) uint32 {
	if n := l.lens[i]; n != longName {
		return uint32(n)
	}
	return l.long[i]
}

func (l *DomainList) start(i int) uint32 {
	m := i / markEvery
	s := l.marks[m]
	for j := m * markEvery; j < i; j++ {
		s += l.length(j)
	}
	return s
}

// name reads name i into buf (reused when big enough).
func (l *DomainList) name(i int, buf []byte) []byte {
	s := l.start(i)
	return l.names.get(s, s+l.length(i), buf)
}

func (l *DomainList) add(rank int, name []byte) {
	i := len(l.lens)
	if i%markEvery == 0 {
		l.marks = append(l.marks, uint32(l.names.size))
	}
	l.names.add(name)
	if len(name) >= longName {
		if l.long == nil {
			l.long = map[int]uint32{}
		}
		l.long[i] = uint32(len(name))
		l.lens = append(l.lens, longName)
	} else {
		l.lens = append(l.lens, uint8(len(name)))
	}
	if l.ranks == nil && rank != i+1 {
		l.ranks = make([]uint32, i, cap(l.lens))
		for j := range l.ranks {
			l.ranks[j] = uint32(j + 1)
		}
	}
	if l.ranks != nil {
		l.ranks = append(l.ranks, uint32(rank))
	}
}

// Index builds the name lookup Find uses (resume).
func (l *DomainList) Index() {
	if l.set != nil {
		return
	}
	l.set = newNameSet(l.Len())
	var buf []byte
	for i := range l.Len() {
		buf = l.name(i, buf)
		l.set.insert(l, buf, i)
	}
}

// Find returns the index of name; Index must have been called.
func (l *DomainList) Find(name string) (int, bool) {
	return l.set.indexOf(l, []byte(name))
}

// nameStore is the names of a list back to back: in memory, or past
// spillNamesAt in a temporary file with the newest bytes in a write buffer.
type nameStore struct {
	mem   []byte // bytes [base, size)
	base  int64  // bytes before base are in f
	size  int64
	f     *os.File
	err   error // the file failed: everything stays in memory from then on
	limit int
}

func (s *nameStore) add(b []byte) {
	limit := spillNamesAt
	if testSpillNamesAt > 0 {
		limit = testSpillNamesAt
	}
	switch {
	case s.err != nil:
	case s.f == nil && s.size+int64(len(b)) > int64(limit):
		s.flush() // the list is long: its names go to the file
	case s.f != nil && len(s.mem)+len(b) > 64<<10:
		s.flush()
	}
	s.mem = append(s.mem, b...)
	s.size += int64(len(b))
}

// flush moves the buffered names to the file (created on first use).
func (s *nameStore) flush() {
	if s.f == nil {
		f, err := unlinkedTemp("mptester-survey-names-*")
		if err != nil {
			s.err = err
			return
		}
		s.f = f
	}
	if _, err := s.f.WriteAt(s.mem, s.base); err != nil {
		s.err = err
		return
	}
	s.base += int64(len(s.mem))
	s.mem = s.mem[:0]
	if cap(s.mem) > 64<<10 {
		s.mem = make([]byte, 0, 64<<10) // the write buffer from now on
	}
}

// done ends building: a spilled store keeps at most its last buffer.
func (s *nameStore) done() {
	if s.f != nil && s.err == nil {
		s.flush()
		if s.err == nil {
			s.mem = nil
		}
	}
	if s.f == nil && cap(s.mem) > len(s.mem)+len(s.mem)/8 {
		s.mem = bytes.Clone(s.mem)
	}
}

func (s *nameStore) get(start, end uint32, buf []byte) []byte {
	if int64(start) >= s.base {
		return append(buf[:0], s.mem[int64(start)-s.base:int64(end)-s.base]...)
	}
	n := int(end - start)
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := s.f.ReadAt(buf, int64(start)); err != nil && err != io.EOF {
		// The file was written by this process and is still open: a
		// failing read means the disk failed under us.
		panic(fmt.Sprintf("survey: read spilled domain names: %v", err))
	}
	return buf
}

func (s *nameStore) close() error {
	if s.f == nil {
		return nil
	}
	err := closeTemp(s.f)
	s.f = nil
	return err
}

// nameSet finds a list's names by their index (an indexTable: 8 MB
// while a 1M list is read, the peak of a 1M survey's memory when its
// slots were 8 bytes). Growing rehashes the names (rare: the table is
// sized from the file).
type nameSet struct {
	indexTable
	seed  maphash.Seed
	testH func([]byte) uint64 // tests: a hash that collides
}

func newNameSet(hint int) *nameSet {
	s := &nameSet{seed: maphash.MakeSeed()}
	s.alloc(max(hint, 8) * 2)
	return s
}

func (s *nameSet) hash(name []byte) uint64 {
	if s.testH != nil {
		return s.testH(name)
	}
	return maphash.Bytes(s.seed, name)
}

// lookup returns the index of name in l, or the slot where it would go.
func (s *nameSet) lookup(l *DomainList, name []byte, h uint64) (idx, slot int, found bool) {
	var buf []byte
	return s.find(h, func(i int) bool {
		buf = l.name(i, buf)
		return bytes.Equal(buf, name)
	})
}

// insert adds index i for name unless the name is there already; it
// returns the index the name has.
func (s *nameSet) insert(l *DomainList, name []byte, i int) (int, bool) {
	h := s.hash(name)
	j, slot, found := s.lookup(l, name, h)
	if found {
		return j, false
	}
	var buf []byte
	s.add(h, i, slot, func(j int) uint64 {
		buf = l.name(j, buf)
		return s.hash(buf)
	})
	return i, true
}

func (s *nameSet) indexOf(l *DomainList, name []byte) (int, bool) {
	if s == nil {
		return 0, false
	}
	i, _, ok := s.lookup(l, name, s.hash(name))
	return i, ok
}
