package list

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mptester/mptester/survey/internal/spill"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A list past the spill threshold keeps its names in a temporary file and
// reads back exactly what was parsed: every name, rank and duplicate.
func TestDomainListSpilled(t *testing.T) {
	defer func(old int) { spill.TestBytesAt = old }(spill.TestBytesAt)
	spill.TestBytesAt = 1000
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
	assert.Equal(t, 3000, s.Len())
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
