package upload

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fullTmpfs mounts a tmpfs of size bytes at a new directory and returns
// it, with a function that fills what is left of it (ENOSPC from then on)
// and one that frees that again.
func fullTmpfs(t *testing.T, size string) (dir string, fill, free func()) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("mounting a tmpfs needs root (CI=true: not skipping)")
		}
		t.Skip("mounting a tmpfs needs root")
	}
	dir = filepath.Join(t.TempDir(), "spool")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size="+size+",mode=0700"))
	t.Cleanup(func() { assert.NoError(t, syscall.Unmount(dir, syscall.MNT_DETACH)) })
	filler := filepath.Join(dir, "filler")
	fill = func() {
		f, err := os.OpenFile(filler, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		require.NoError(t, err)
		defer f.Close()
		for {
			if _, err := f.Write(make([]byte, 512)); err != nil {
				require.ErrorIs(t, err, syscall.ENOSPC)
				return
			}
		}
	}
	free = func() { require.NoError(t, os.Remove(filler)) }
	return dir, fill, free
}

// TestDropCountsExactOnFullDisk: with the spool's filesystem full (a real
// tmpfs), the quota's drops are counted although the counter cannot be
// written, reported with the next receipt once, and the counter is
// brought back to what it must hold: the collector gets every drop
// exactly once.
func TestDropCountsExactOnFullDisk(t *testing.T) {
	sv := newServer(t, nil)
	dir, fill, free := fullTmpfs(t, "64k")
	sp, err := OpenSpool(dir, Quota{})
	require.NoError(t, err)
	base := time.Now().Add(-time.Hour)
	spool := func(n int) []string {
		var ids []string
		for range n {
			id := uuid.NewString()
			spoolResult(t, sp, result(t, id, "pi1"), id)
			require.NoError(t, os.Chtimes(filepath.Join(dir, dirNew, id+".jsonl"), base, base))
			base = base.Add(time.Minute)
			ids = append(ids, id)
		}
		return ids
	}
	collected := func() int64 {
		ps, err := sv.st.ListProbes(context.Background())
		require.NoError(t, err)
		return ps[0].Dropped
	}

	// 1. Drops on a full disk, the counter not yet on disk: the results
	// are hard-linked elsewhere on the tmpfs, so dropping them frees
	// nothing, and neither the atomic nor the in-place write can take a
	// block.
	ids := spool(3)
	require.NoError(t, os.Mkdir(filepath.Join(dir, "keep"), 0o700))
	for _, id := range ids {
		require.NoError(t, os.Link(filepath.Join(dir, dirNew, id+".jsonl"), filepath.Join(dir, "keep", id)))
	}
	fill()
	one := int64(len(result(t, ids[0], "pi1")))
	sp.quota = Quota{MaxBytes: one + one/2}
	n, err := sp.enforceQuota()
	require.Error(t, err, "the counter cannot be written")
	require.True(t, errors.Is(err, syscall.ENOSPC), "ENOSPC, got %v", err)
	assert.Equal(t, 2, n)
	assert.Equal(t, int64(0), sp.droppedOnDisk())
	assert.Equal(t, int64(2), sp.Dropped(), "counted in memory")

	// Reported with the next receipt (the counter still cannot be written).
	sp.quota = Quota{}
	_, err = client(sv, nil, CompressZstd).Drain(context.Background(), sp)
	require.NoError(t, err)
	assert.Equal(t, int64(2), collected())
	assert.Equal(t, int64(0), sp.Dropped(), "reported once")

	// 2. Room again: one more drop goes on disk.
	free()
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "keep")))
	spool(2)
	sp.quota = Quota{MaxBytes: one + one/2}
	n, err = sp.enforceQuota()
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, int64(1), sp.droppedOnDisk())

	// Full again: the receipt's subtraction cannot go through a new file;
	// it is written in place, so the disk holds 0, not a count a later
	// process would report again.
	fill()
	sp.quota = Quota{}
	_, err = client(sv, nil, CompressZstd).Drain(context.Background(), sp)
	require.NoError(t, err)
	assert.Equal(t, int64(3), collected(), "every drop reported exactly once")
	assert.Equal(t, int64(0), sp.Dropped())
	assert.Equal(t, int64(0), sp.droppedOnDisk(), "written in place")
	again, err := OpenSpool(dir, Quota{}) // the next process
	require.NoError(t, err)
	assert.Equal(t, int64(0), again.Dropped())
}
