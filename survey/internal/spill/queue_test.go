package spill

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type queued struct {
	N    int
	Tags []string
}

// Items past InMemory go through the temporary file and come back once
// each, in arrival order, the spilled ones said to be; without a file
// (NoFile) they all stay in memory and the queue is capped.
func TestQueueSpilled(t *testing.T) {
	for _, noFile := range []bool{false, true} {
		q := Queue[queued]{InMemory: 3, NoFile: noFile}
		for i := range 10 {
			q.Add(queued{N: i, Tags: []string{"t"}})
		}
		assert.Equal(t, noFile, q.Capped())
		if noFile {
			assert.Equal(t, 10, q.InMemoryLen())
		} else {
			assert.Equal(t, 3, q.InMemoryLen())
		}
		var got []int
		err := q.Drain(func(it queued, spilled bool) {
			assert.Equal(t, !noFile && it.N >= 3, spilled, "item %d", it.N)
			assert.Equal(t, []string{"t"}, it.Tags)
			got = append(got, it.N)
		})
		require.NoError(t, err)
		assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, got)
		assert.Equal(t, 0, q.InMemoryLen(), "drained")
		assert.Equal(t, 3, q.InMemory, "settings kept")
		assert.Equal(t, noFile, q.NoFile)
	}
}
