package upload

import (
	"errors"
	"os"
	"path/filepath"
)

// ErrLocked: another mptester (say a second cron run) is uploading from
// this spool; its files are left to it.
var ErrLocked = errors.New("spool is locked by another upload")

// Lock takes the spool's upload lock without waiting; the lock is the
// kernel's (flock, LockFileEx), so a killed holder releases it.
func (s *Spool) Lock() (unlock func(), err error) { return LockFile(filepath.Join(s.dir, "lock")) }

// LockFile takes an exclusive lock on path without waiting (ErrLocked).
func LockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}
