package spill

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The domains of every address come back grouped, in arrival order,
// whether they stayed in memory or went through the temporary files in
// several grouping passes.
func TestGroupsSpilled(t *testing.T) {
	defer func(old int) { TestGroupsAt = old }(TestGroupsAt)
	for _, at := range []int{0, 7} {
		TestGroupsAt = at
		var d Groups
		want := map[int32][]uint32{}
		for i := range 5000 {
			ai := int32((i * 7919) % 97)
			if i%500 == 0 {
				ai = 3 // one address with more entries than a grouping pass holds
			}
			e := uint32(i%3)<<24 | uint32(i)
			d.Add(ai, e)
			want[ai] = append(want[ai], e)
		}
		require.NoError(t, d.Seal(100))
		assert.Equal(t, at > 0, d.g != nil)
		for ai := range int32(100) {
			assert.Equal(t, want[ai], append([]uint32(nil), d.Get(ai, nil)...), "address %d", ai)
		}
		n := 0
		d.Each(func(ai int32, doms []uint32) {
			assert.Equal(t, int32(n), ai)
			assert.Equal(t, want[ai], append([]uint32(nil), doms...))
			n++
		})
		assert.Equal(t, 100, n)
		d.Close()
	}
}
