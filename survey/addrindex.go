package survey

import (
	"hash/maphash"
	"net/netip"
)

// addrIndex numbers the resolved addresses 0, 1, 2, ... in order of first
// sight: the addresses in a slice by number and an open-addressing table
// of numbers (4 bytes a slot, at most half full), about 32 bytes an
// address where a map[netip.Addr]int32 took ~84 (issue 18: 5.5 MB of the
// 100K lab survey's live heap). Callers serialise insert; get and addr
// are safe alongside each other.
type addrIndex struct {
	seed  maphash.Seed
	addrs []netip.Addr
	slots []int32 // number+1; 0 = empty
}

func (x *addrIndex) len() int { return len(x.addrs) }

// addr is address number i.
func (x *addrIndex) addr(i int32) netip.Addr { return x.addrs[i] }

func (x *addrIndex) hash(a netip.Addr) uint64 {
	b := a.As16()
	h := maphash.Bytes(x.seed, b[:])
	if a.Is4() {
		h = ^h // 1.2.3.4 and ::ffff:1.2.3.4 are different addresses
	}
	return h
}

// find returns a's number, or the slot where it would go.
func (x *addrIndex) find(a netip.Addr) (int32, int, bool) {
	if len(x.slots) == 0 {
		return 0, -1, false
	}
	mask := len(x.slots) - 1
	for p := int(x.hash(a)) & mask; ; p = (p + 1) & mask {
		v := x.slots[p]
		if v == 0 {
			return 0, p, false
		}
		if x.addrs[v-1] == a {
			return v - 1, p, true
		}
	}
}

// get returns a's number.
func (x *addrIndex) get(a netip.Addr) (int32, bool) {
	i, _, ok := x.find(a)
	return i, ok
}

// insert returns a's number, numbering it if new.
func (x *addrIndex) insert(a netip.Addr) (int32, bool) {
	i, slot, ok := x.find(a)
	if ok {
		return i, false
	}
	if 2*(len(x.addrs)+1) > len(x.slots) {
		x.grow()
		_, slot, _ = x.find(a)
	}
	x.addrs = append(x.addrs, a)
	i = int32(len(x.addrs) - 1)
	x.slots[slot] = i + 1
	return i, true
}

func (x *addrIndex) grow() {
	if len(x.slots) == 0 {
		x.seed = maphash.MakeSeed()
	}
	x.slots = make([]int32, max(64, 2*len(x.slots)))
	mask := len(x.slots) - 1
	for i, a := range x.addrs {
		p := int(x.hash(a)) & mask
		for x.slots[p] != 0 {
			p = (p + 1) & mask
		}
		x.slots[p] = int32(i) + 1
	}
}
