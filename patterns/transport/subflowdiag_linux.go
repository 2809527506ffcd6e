package transport

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

var diagSeq atomic.Uint32

// subflowFlags asks the kernel (sock_diag, exact lookup by the subflow's
// addresses and interface: a subflow of a `dev` endpoint is bound to it
// and found only with its index) for one TCP subflow's MPTCP flags. It
// needs CAP_NET_ADMIN for the ULP info; without it callers fall back to
// the host's endpoint role.
func subflowFlags(local, remote netip.AddrPort, ifindex int) (uint32, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200_000})
	family := byte(unix.AF_INET)
	if local.Addr().Is6() {
		family = unix.AF_INET6
	}
	const hdr, req = 16, 56 // nlmsghdr, inet_diag_req_v2
	b := make([]byte, hdr+req)
	ne := binary.NativeEndian
	seq := diagSeq.Add(1)
	ne.PutUint32(b[0:], hdr+req)
	ne.PutUint16(b[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(b[6:], unix.NLM_F_REQUEST)
	ne.PutUint32(b[8:], seq)
	r := b[hdr:]
	r[0], r[1] = family, unix.IPPROTO_TCP
	r[2] = 1 << (2 - 1) // INET_DIAG_INFO: the kernel then adds the ULP info too
	ne.PutUint32(r[4:], 0xffffffff)
	id := r[8:]
	binary.BigEndian.PutUint16(id[0:], local.Port())
	binary.BigEndian.PutUint16(id[2:], remote.Port())
	put := func(dst []byte, a netip.Addr) {
		if a.Is4() {
			v := a.As4()
			copy(dst, v[:])
		} else {
			v := a.As16()
			copy(dst, v[:])
		}
	}
	put(id[4:20], local.Addr())
	put(id[20:36], remote.Addr())
	ne.PutUint32(id[36:], uint32(ifindex))
	ne.PutUint32(id[40:], 0xffffffff) // INET_DIAG_NOCOOKIE
	ne.PutUint32(id[44:], 0xffffffff)
	if err := unix.Sendto(fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, err
	}
	buf := make([]byte, 8192)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return 0, err
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return 0, err
	}
	for _, m := range msgs {
		switch m.Header.Type {
		case unix.NLMSG_ERROR:
			if len(m.Data) >= 4 {
				if e := int32(ne.Uint32(m.Data)); e != 0 {
					return 0, fmt.Errorf("sock_diag: %w", unix.Errno(-e))
				}
			}
		case unix.SOCK_DIAG_BY_FAMILY:
			return DecodeSubflowFlags(m.Data)
		}
	}
	return 0, errNoSubflowFlags
}
