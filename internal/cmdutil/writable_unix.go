//go:build unix

package cmdutil

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// writable asks the kernel whether this process may write path (or create
// it in dir), without opening either.
func writable(path, dir string) error {
	if _, err := os.Stat(path); err == nil {
		return unix.Access(path, unix.W_OK)
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return unix.Access(dir, unix.W_OK|unix.X_OK)
}
