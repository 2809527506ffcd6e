package probe

import "golang.org/x/sys/unix"

// macOS has no MPTCP sockets: the mptcp transport dials through
// Network.framework instead (probe/nw).
const mptcpSupported = false

func bindToPath(fd uintptr, p Path, f Family) error {
	if f == Family6 {
		return unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_BOUND_IF, p.Index)
	}
	return unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_BOUND_IF, p.Index)
}
