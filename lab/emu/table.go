package emu

import (
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
)

// ipAddrs returns the source and destination of a raw IPv4/IPv6 packet.
func ipAddrs(p []byte) (src, dst netip.Addr, ok bool) {
	if len(p) == 0 {
		return
	}
	switch p[0] >> 4 {
	case 4:
		if len(p) < 20 {
			return
		}
		return netip.AddrFrom4([4]byte(p[12:16])), netip.AddrFrom4([4]byte(p[16:20])), true
	case 6:
		if len(p) < 40 {
			return
		}
		return netip.AddrFrom16([16]byte(p[8:24])), netip.AddrFrom16([16]byte(p[24:40])), true
	}
	return
}

// addrTable maps addresses to values: single addresses (/32, /128) in a map
// since a lab world holds ~20k of them, other prefixes in a short list
// scanned longest first.
type addrTable[V any] struct {
	n        atomic.Int64 // entries; lets the per-packet lookup skip the lock when empty
	mu       sync.RWMutex
	exact    map[netip.Addr]V
	prefixes []prefixEntry[V] // longest first
}

type prefixEntry[V any] struct {
	p netip.Prefix
	v V
}

func normPrefix(p netip.Prefix) (netip.Prefix, bool) {
	if !p.IsValid() {
		return p, false
	}
	a := p.Addr()
	if a.Is4In6() {
		if p.Bits() < 96 {
			return p.Masked(), true
		}
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), true
}

func (t *addrTable[V]) set(p netip.Prefix, v V) {
	p, ok := normPrefix(p)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if p.IsSingleIP() {
		if t.exact == nil {
			t.exact = make(map[netip.Addr]V)
		}
		t.exact[p.Addr()] = v
	} else if i := slices.IndexFunc(t.prefixes, func(e prefixEntry[V]) bool { return e.p == p }); i >= 0 {
		t.prefixes[i].v = v
	} else {
		t.prefixes = append(t.prefixes, prefixEntry[V]{p, v})
		slices.SortStableFunc(t.prefixes, func(a, b prefixEntry[V]) int { return b.p.Bits() - a.p.Bits() })
	}
	t.n.Store(int64(len(t.exact) + len(t.prefixes)))
}

func (t *addrTable[V]) del(p netip.Prefix) {
	p, ok := normPrefix(p)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if p.IsSingleIP() {
		delete(t.exact, p.Addr())
	} else {
		t.prefixes = slices.DeleteFunc(t.prefixes, func(e prefixEntry[V]) bool { return e.p == p })
	}
	t.n.Store(int64(len(t.exact) + len(t.prefixes)))
}

func (t *addrTable[V]) lookup(a netip.Addr) (v V, ok bool) {
	if t.n.Load() == 0 {
		return v, false
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if v, ok = t.exact[a]; ok {
		return v, true
	}
	for _, e := range t.prefixes {
		if e.p.Contains(a) {
			return e.v, true
		}
	}
	return v, false
}
