package survey

import (
	"fmt"
	"net/netip"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
// is 4 bytes (a top-1M list resolves to ~1.5M addresses).
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
	inMemory := x.MemBytes() + cap(x.mem)
	assert.LessOrEqual(t, float64(inMemory)/100_000, 11.0, "bytes in memory an address")
}
