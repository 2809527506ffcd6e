package survey

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A list past the spill threshold keeps its names in a temporary file and
// reads back exactly what was parsed: every name, rank and duplicate.
func TestDomainListSpilled(t *testing.T) {
	defer func(old int) { testSpillNamesAt = old }(testSpillNamesAt)
	testSpillNamesAt = 1000
	var b strings.Builder
	var want []Domain
	for i := 1; i <= 5000; i++ {
		name := fmt.Sprintf("site%d.example", i)
		if i%7 == 0 { // a duplicate of an earlier line
			name = fmt.Sprintf("site%d.example", i-1)
		} else {
			want = append(want, Domain{Rank: i, Name: name})
		}
		fmt.Fprintf(&b, "%d,%s\n", i, name)
	}
	l, info, err := parseList(strings.NewReader(b.String()), 0, 16)
	require.NoError(t, err)
	defer l.Close()
	assert.True(t, l.Spilled())
	assert.Equal(t, 5000/7, info.Duplicates)
	require.Equal(t, len(want), l.Len())
	assert.Equal(t, want, l.Slice())
	l.Index()
	for i, d := range want {
		j, ok := l.Find(d.Name)
		require.True(t, ok, d.Name)
		require.Equal(t, i, j)
	}
	_, ok := l.Find("site5001.example")
	assert.False(t, ok)

	small := NewDomainList(want[:10]) // ranks 1-6, then 8 (7 was a duplicate)
	assert.False(t, small.Spilled())
	assert.Equal(t, want[:10], small.Slice())
	assert.NotNil(t, small.ranks)
	implicit := NewDomainList(want[:6])
	assert.Nil(t, implicit.ranks, "ranks 1..6 need no table")
	assert.Equal(t, want[:6], implicit.Slice())
}

// Names whose 32-bit hashes collide are still told apart by their bytes.
func TestNameSetCollisions(t *testing.T) {
	l := NewDomainList(nil)
	s := newNameSet(4)
	s.testH = func(b []byte) uint64 { return uint64(len(b)) } // 4 distinct hashes for 3000 names
	for i := range 3000 {
		name := []byte(fmt.Sprintf("n%d.test", i))
		_, isNew := s.insert(l, name, l.Len())
		require.True(t, isNew)
		l.add(i+1, name)
	}
	for i := range 3000 {
		_, isNew := s.insert(l, []byte(fmt.Sprintf("n%d.test", i)), l.Len())
		require.False(t, isNew)
	}
	assert.Equal(t, 3000, s.n)
}

// The domains of every address come back grouped, in arrival order,
// whether they stayed in memory or went through the temporary files in
// several grouping passes.
func TestDomStoreSpilled(t *testing.T) {
	defer func(old int) { testDomSpillAt = old }(testDomSpillAt)
	for _, at := range []int{0, 7} {
		testDomSpillAt = at
		var d domStore
		want := map[int32][]uint32{}
		for i := range 5000 {
			ai := int32((i * 7919) % 97)
			if i%500 == 0 {
				ai = 3 // one address with more entries than a grouping pass holds
			}
			e := uint32(i%3)<<24 | uint32(i)
			d.add(ai, e)
			want[ai] = append(want[ai], e)
		}
		require.NoError(t, d.seal(100))
		assert.Equal(t, at > 0, d.g != nil)
		for ai := range int32(100) {
			assert.Equal(t, want[ai], append([]uint32(nil), d.get(ai, nil)...), "address %d", ai)
		}
		n := 0
		d.each(func(ai int32, doms []uint32) {
			assert.Equal(t, int32(n), ai)
			assert.Equal(t, want[ai], append([]uint32(nil), doms...))
			n++
		})
		assert.Equal(t, 100, n)
		d.close()
	}
}

// The address index numbers addresses in order of first sight, tells an
// IPv4 address from its IPv4-mapped IPv6 form, survives growth and keeps
// each address's record, in memory and, past the threshold, in its
// temporary file alike.
func TestAddrIndex(t *testing.T) {
	for _, memRecs := range []int{0, 1000} {
		t.Run(fmt.Sprintf("memRecs=%d", memRecs), func(t *testing.T) {
			defer func(old int) { testAddrMemRecords = old }(testAddrMemRecords)
			testAddrMemRecords = memRecs
			x := newAddrIndex(3)
			defer x.close()
			_, ok := x.get(netip.MustParseAddr("1.2.3.4"))
			assert.False(t, ok)
			var all []netip.Addr
			for i := range 5000 {
				a := netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
				all = append(all, a, netip.AddrFrom16(a.As16()))
			}
			for i, a := range all {
				n, isNew := x.insert(a)
				require.True(t, isNew, a)
				require.Equal(t, int32(i), n)
				rec := x.load(n)
				rec.on = uint16(i)
				rec.path[i%3] = pathRec{state: targetQueued, flags: resSet | resResponsive, medianMs: float32(i) / 8}
				x.store(n, &rec)
			}
			for i, a := range all {
				n, isNew := x.insert(a)
				require.False(t, isNew)
				require.Equal(t, int32(i), n)
				g, ok := x.get(a)
				require.True(t, ok)
				require.Equal(t, int32(i), g)
				require.Equal(t, a, x.addr(n))
				rec := x.load(n)
				require.Equal(t, a, rec.addr)
				require.Equal(t, uint16(i), rec.on)
				for pi := range 3 {
					want := pathRec{}
					if pi == i%3 {
						want = pathRec{state: targetQueued, flags: resSet | resResponsive, medianMs: float32(i) / 8}
					}
					require.Equal(t, want, rec.path[pi], "address %d path %d", i, pi)
				}
			}
			assert.Equal(t, len(all), x.len())
			assert.NoError(t, x.err)
			if memRecs > 0 {
				require.NotNil(t, x.f, "past the threshold the records are in a file")
				st, err := x.f.Stat()
				require.NoError(t, err)
				assert.Equal(t, int64(len(all)-memRecs)*int64(addrHead+3*pathRecSize), st.Size())
				assert.Len(t, x.mem, memRecs*(addrHead+3*pathRecSize), "no more in memory than the threshold")
			}
		})
	}
}

// A record the temporary file can no longer take is not lost silently:
// the index keeps the error (the run ends with it) and the record reads
// as empty rather than as another address's.
func TestAddrIndexFileError(t *testing.T) {
	defer func(old int) { testAddrMemRecords = old }(testAddrMemRecords)
	testAddrMemRecords = 1
	x := newAddrIndex(2)
	defer x.close()
	a, b := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	x.insert(a)
	x.insert(b) // the first record in the file
	require.NoError(t, x.err)
	require.NoError(t, x.f.Close()) // the disk goes away
	rec := x.load(1)
	require.Error(t, x.err)
	assert.Contains(t, x.err.Error(), "survey: address records")
	assert.Equal(t, addrRec{addr: netip.AddrFrom16([16]byte{})}, rec)
	i, ok := x.get(a)
	assert.True(t, ok, "records in memory still answer")
	assert.Equal(t, int32(0), i)
}

// What stays in memory per address is its lookup slot; a queued target
// is 4 bytes (a top-1M list resolves to ~1.5M addresses, issue 18).
func TestAddrStateIsCompact(t *testing.T) {
	if n := unsafe.Sizeof(queuedTarget(0)); n != 4 {
		t.Fatalf("a queued target is %d bytes, want 4", n)
	}
	defer func(old int) { testAddrMemRecords = old }(testAddrMemRecords)
	testAddrMemRecords = 100
	x := newAddrIndex(2)
	defer x.close()
	for i := range 100_000 {
		x.insert(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))
	}
	inMemory := 4*cap(x.slots) + cap(x.mem)
	assert.LessOrEqual(t, float64(inMemory)/100_000, 11.0, "bytes in memory an address")
}

// Names are found from their lengths and a start offset every markEvery
// names: every name across several marks, in any order, and a name too
// long for a length byte (not a DNS name, but NewDomainList takes any).
func TestDomainListLengthsAndMarks(t *testing.T) {
	var ds []Domain
	for i := range 3*markEvery + 5 {
		name := fmt.Sprintf("d%d.%s.test", i, strings.Repeat("x", i%70))
		if i == markEvery+3 {
			name = strings.Repeat("l", 300) + ".test"
		}
		ds = append(ds, Domain{Rank: i + 1, Name: name})
	}
	l := NewDomainList(ds)
	defer l.Close()
	for _, i := range rand.Perm(len(ds)) {
		if got := l.At(i); got != ds[i] {
			t.Fatalf("domain %d: %+v, want %+v", i, got, ds[i])
		}
	}
}
