package collect_test

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect"
)

// TestFullDiskSQLite507: the SQLite index on a full file system (a small
// tmpfs, filled) answers 507 "storage full", not 500, and names no path.
func TestFullDiskSQLite507(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=4m"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("mount tmpfs (needs root): %v", err)
		}
		t.Skipf("mounting a tmpfs needs root: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	e := newEnvIn(t, dir, func(l *collect.Limits) {})
	id := uuid.NewString()
	require.Equal(t, http.StatusCreated, e.put(t, id, stream(t, id, "pi1"), e.probeTok, "").code)
	// Fill the file system.
	f, err := os.Create(filepath.Join(dir, "filler"))
	require.NoError(t, err)
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			require.True(t, errors.Is(err, syscall.ENOSPC), "%v", err)
			break
		}
	}
	f.Close()
	// Inline uploads (a few kB) go to SQLite only: its write fails full.
	got507 := false
	for range 50 {
		id := uuid.NewString()
		a := e.put(t, id, stream(t, id, "pi1"), e.probeTok, "")
		if a.code == http.StatusCreated {
			continue // a page with room left
		}
		require.Equal(t, http.StatusInsufficientStorage, a.code, "%s", a.body)
		assert.NotContains(t, string(a.body), dir)
		got507 = true
		break
	}
	assert.True(t, got507, "the full disk was never noticed")
}
