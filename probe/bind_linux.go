package probe

import "golang.org/x/sys/unix"

const mptcpSupported = true

func bindToPath(fd uintptr, p Path, _ Family) error {
	return unix.SetsockoptString(int(fd), unix.SOL_SOCKET, unix.SO_BINDTODEVICE, p.Name)
}
