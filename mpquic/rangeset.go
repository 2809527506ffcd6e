package mpquic

// span is the closed interval [lo, hi].
type span struct{ lo, hi uint64 }

// rangeSet is a set of integers kept as sorted, disjoint, non-adjacent
// spans: received packet numbers (for ACK frames) and acknowledged stream
// offsets. Inserts near the top, the common case, cost O(1).
type rangeSet []span

// add inserts [lo, hi] and reports whether any of it was new.
func (s *rangeSet) add(lo, hi uint64) bool {
	r := *s
	// Find the first span that ends at or after lo-1 (could merge).
	i := len(r)
	for i > 0 && r[i-1].hi+1 >= lo {
		i--
	}
	if i == len(r) {
		*s = append(r, span{lo, hi})
		return true
	}
	if r[i].lo > hi+1 { // disjoint, insert before r[i]
		r = append(r, span{})
		copy(r[i+1:], r[i:])
		r[i] = span{lo, hi}
		*s = r
		return true
	}
	// Merge with r[i] and any following spans it now touches.
	if r[i].lo <= lo && r[i].hi >= hi {
		return false
	}
	if lo < r[i].lo {
		r[i].lo = lo
	}
	j := i
	for j+1 < len(r) && r[j+1].lo <= hi+1 {
		j++
	}
	if r[j].hi > hi {
		hi = r[j].hi
	}
	if hi > r[i].hi {
		r[i].hi = hi
	}
	*s = append(r[:i+1], r[j+1:]...)
	return true
}

func (s rangeSet) contains(v uint64) bool {
	for i := len(s) - 1; i >= 0; i-- {
		if v > s[i].hi {
			return false
		}
		if v >= s[i].lo {
			return true
		}
	}
	return false
}
