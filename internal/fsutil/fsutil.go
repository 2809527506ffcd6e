// Package fsutil holds the durable-write steps the spool, the collector's
// raw store and the agent's state share.
package fsutil

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// SyncDir makes a create or rename in dir durable (POSIX: fsync the
// directory). Windows cannot fsync a directory; NTFS journals renames.
func SyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// WriteFileAtomic replaces path with b: a temporary written and fsynced,
// renamed over path, the directory fsynced. Readers see the old or the
// new content, never a mix, also after a crash.
func WriteFileAtomic(path string, b []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after a successful rename: a no-op
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil && runtime.GOOS != "windows" {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}
