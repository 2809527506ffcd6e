package list

import (
	"bytes"
	"hash/maphash"

	"github.com/mptester/mptester/survey/internal/spill"
)

// DomainList is a ranked list held compactly (a top-1M list as []Domain
// was ~45 MB of string headers and names, its duplicate check a
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
	names spill.Bytes
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

// NewDomainList copies ds into a compact list.
func NewDomainList(ds []Domain) *DomainList {
	l := newDomainList(len(ds))
	for _, d := range ds {
		l.add(d.Rank, []byte(d.Name))
	}
	l.names.Done()
	return l
}

func newDomainList(hint int) *DomainList {
	return &DomainList{lens: make([]uint8, 0, hint), names: spill.Bytes{SpillAt: spillNamesAt}}
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
func (l *DomainList) Spilled() bool { return l.names.Spilled() }

// Close removes the temporary file, if any.
func (l *DomainList) Close() error {
	if l == nil {
		return nil
	}
	return l.names.Close()
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
	return l.names.Get(s, s+l.length(i), buf)
}

func (l *DomainList) add(rank int, name []byte) {
	i := len(l.lens)
	if i%markEvery == 0 {
		l.marks = append(l.marks, uint32(l.names.Len()))
	}
	l.names.Add(name)
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

// DropIndex frees what Index built.
func (l *DomainList) DropIndex() { l.set = nil }

// Find returns the index of name; Index must have been called.
func (l *DomainList) Find(name string) (int, bool) {
	return l.set.indexOf(l, []byte(name))
}

// nameSet finds a list's names by their index (a spill.IndexTable: 8 MB
// while a 1M list is read, the peak of a 1M survey's memory when its
// slots were 8 bytes). Growing rehashes the names (rare: the table is
// sized from the file).
type nameSet struct {
	spill.IndexTable
	seed  maphash.Seed
	testH func([]byte) uint64 // tests: a hash that collides
}

func newNameSet(hint int) *nameSet {
	s := &nameSet{seed: maphash.MakeSeed()}
	s.Alloc(max(hint, 8) * 2)
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
	return s.Find(h, func(i int) bool {
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
	s.Add(h, i, slot, func(j int) uint64 {
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
