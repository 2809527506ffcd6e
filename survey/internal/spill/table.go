package spill

// IndexTable is the lookup table of items numbered 0, 1, 2, ... and kept
// elsewhere (a list's names, the addresses' records): open addressing, 4
// bytes a slot, at most half full. A slot holds number+1 and the top 7
// bits of its item's hash, so a lookup looks at an item only when those
// bits match (1 in 128 for another item); the slot comes from the hash's
// low bits. Growing places every number again from its item's hash,
// which the caller gives (items are not in the table).
type IndexTable struct {
	slots []uint32
	n     int
}

// Len is how many numbers the table holds.
func (t *IndexTable) Len() int { return t.n }

const (
	tableIndexBits = 25 // number+1 in a slot's low bits
	// MaxTableItems: numbers run from 0 to MaxTableItems-1 (33M).
	MaxTableItems = 1<<tableIndexBits - 2
)

func tableEntry(h uint64, i int) uint32 { return uint32(h>>57)<<tableIndexBits | uint32(i+1) }

// Alloc makes an empty table of at least want slots (a power of two).
func (t *IndexTable) Alloc(want int) {
	size := 16
	for size < want {
		size *= 2
	}
	t.slots = make([]uint32, size)
}

// Find returns the number of the item hashed to h for which same says
// true, or the free slot where it would go.
func (t *IndexTable) Find(h uint64, same func(i int) bool) (i, slot int, found bool) {
	if len(t.slots) == 0 {
		return 0, -1, false
	}
	mask := len(t.slots) - 1
	tag := uint32(h >> 57)
	for p := int(h) & mask; ; p = (p + 1) & mask {
		e := t.slots[p]
		if e == 0 {
			return 0, p, false
		}
		if e>>tableIndexBits == tag {
			if i := int(e&(1<<tableIndexBits-1)) - 1; same(i) {
				return i, p, true
			}
		}
	}
}

// Add enters number i for the item hashed to h at slot, from a Find that
// did not find it; hashOf gives a numbered item's hash should the table
// have to grow first.
func (t *IndexTable) Add(h uint64, i, slot int, hashOf func(i int) uint64) {
	if 2*(t.n+1) > len(t.slots) {
		t.grow(hashOf)
		_, slot, _ = t.Find(h, func(int) bool { return false })
	}
	t.slots[slot] = tableEntry(h, i)
	t.n++
}

func (t *IndexTable) grow(hashOf func(i int) uint64) {
	old := t.slots
	t.Alloc(2 * len(old))
	mask := len(t.slots) - 1
	for _, e := range old {
		if e == 0 {
			continue
		}
		p := int(hashOf(int(e&(1<<tableIndexBits-1))-1)) & mask
		for t.slots[p] != 0 {
			p = (p + 1) & mask
		}
		t.slots[p] = e // the tag is the same hash's
	}
}

// MemBytes is the table's size in memory.
func (t *IndexTable) MemBytes() int { return 4 * cap(t.slots) }
