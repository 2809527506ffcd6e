package emu

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// OpenTUN creates (or attaches to) TUN device name with IFF_TUN|IFF_NO_PI
// in the network namespace of the calling thread. The fd is nonblocking
// and registered with the Go poller, so a Read blocked on it returns when
// the file is closed. The device disappears when the file is closed.
func OpenTUN(name string) (*os.File, error) {
	if len(name) == 0 || len(name) >= unix.IFNAMSIZ {
		return nil, fmt.Errorf("open TUN %q: name must be 1..%d bytes", name, unix.IFNAMSIZ-1)
	}
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open TUN %s: /dev/net/tun: %w", name, err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("open TUN %s: %w", name, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("open TUN %s: TUNSETIFF: %w", name, err)
	}
	return os.NewFile(uintptr(fd), "tun:"+name), nil
}
