package mpquic

import (
	"encoding/binary"
	"net"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// batchReader reads a client path's UDP socket with recvmmsg(2), many
// datagrams a system call, and UDP GRO (linux/udp.h UDP_GRO): the kernel
// hands a run of same-size datagrams (a GSO sender's train, on loopback or
// from a GRO-capable NIC) as one buffer with the segment size in a
// control message. One recvfrom per datagram was most of a download's
// CPU at the receiver.
type batchReader struct {
	rc    syscall.RawConn
	msgs  []unix.Mmsghdr
	iovs  []unix.Iovec
	bufs  [][]byte
	names []unix.RawSockaddrInet6
	oobs  [][]byte
	gro   bool

	n, next, off int        // messages read; the one being handed out; offset in it
	seg          int        // its segment size
	ecn          byte       // its ECN codepoint (every segment of a GRO message has the first's TOS)
	to           netip.Addr // its destination, where the socket asks for it (IP_PKTINFO: a listener)
	from         net.Addr
	lastName     unix.RawSockaddrInet6
	lastFrom     net.Addr
}

const (
	batchMsgs    = 8       // messages a recvmmsg
	groBufSize   = 1 << 16 // a GRO message is at most 64 KiB
	batchOOBSize = 128     // GRO, TOS/TCLASS and IPv6 PKTINFO messages together
)

// newBatchReader returns nil where pc is not a plain UDP socket (a test's
// wrapper): the caller then reads one datagram a call.
func newBatchReader(pc net.PacketConn) *batchReader {
	uc, ok := pc.(*net.UDPConn)
	if !ok {
		return nil
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return nil
	}
	r := &batchReader{rc: rc}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_GRO, 1)
	}); err == nil && serr == nil {
		r.gro = true
	}
	size := readBufSize
	if r.gro {
		size = groBufSize
	}
	r.msgs = make([]unix.Mmsghdr, batchMsgs)
	r.iovs = make([]unix.Iovec, batchMsgs)
	r.names = make([]unix.RawSockaddrInet6, batchMsgs)
	r.bufs = make([][]byte, batchMsgs)
	r.oobs = make([][]byte, batchMsgs)
	for i := range r.msgs {
		r.bufs[i] = make([]byte, size)
		r.oobs[i] = make([]byte, batchOOBSize)
	}
	return r
}

// read fills the batch: one recvmmsg, blocking in the netpoller (so read
// deadlines hold) until at least one datagram is there.
func (r *batchReader) read() error {
	for i := range r.msgs {
		r.iovs[i].Base = &r.bufs[i][0]
		r.iovs[i].SetLen(len(r.bufs[i]))
		h := &r.msgs[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&r.names[i]))
		h.Namelen = uint32(unsafe.Sizeof(r.names[i]))
		h.Iov = &r.iovs[i]
		h.SetIovlen(1)
		h.Control = &r.oobs[i][0]
		h.SetControllen(len(r.oobs[i]))
		h.Flags = 0
		r.msgs[i].Len = 0
	}
	var n int
	var errno syscall.Errno
	err := r.rc.Read(func(fd uintptr) bool {
		r0, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.msgs[0])), uintptr(len(r.msgs)), unix.MSG_DONTWAIT, 0, 0)
		if e == unix.EAGAIN || e == unix.EINTR {
			return false // wait in the poller
		}
		n, errno = int(r0), e
		return true
	})
	if err != nil {
		return err
	}
	if errno != 0 {
		return &net.OpError{Op: "read", Net: "udp", Err: errno}
	}
	r.n, r.next, r.off = n, 0, 0
	r.start()
	return nil
}

// start sets up message r.next: its sender and segment size.
func (r *batchReader) start() {
	if r.next >= r.n {
		return
	}
	i := r.next
	r.seg = int(r.msgs[i].Len)
	c := parseControl(r.oobs[i][:controlLen(&r.msgs[i].Hdr)])
	if r.gro && c.seg > 0 {
		r.seg = c.seg
	}
	r.ecn, r.to = c.ecn, c.dst
	if r.lastFrom == nil || r.names[i] != r.lastName {
		r.lastName, r.lastFrom = r.names[i], sockaddrUDP(&r.names[i])
	}
	r.from = r.lastFrom
}

// nextDatagram returns the next datagram (valid until the next call), its
// sender, its destination (invalid unless the socket asks for it) and ECN
// codepoint, reading a batch when the last one is used up.
func (r *batchReader) nextDatagram() ([]byte, net.Addr, netip.Addr, byte, error) {
	for r.next >= r.n {
		if err := r.read(); err != nil {
			return nil, nil, netip.Addr{}, 0, err
		}
	}
	i := r.next
	total := int(r.msgs[i].Len)
	end := min(r.off+r.seg, total)
	b := r.bufs[i][r.off:end]
	from, to, ecn := r.from, r.to, r.ecn
	r.off = end
	if r.off >= total || r.seg == 0 {
		r.next++
		r.off = 0
		r.start()
	}
	return b, from, to, ecn, nil
}

func controlLen(h *unix.Msghdr) int { return int(h.Controllen) }

func sockaddrUDP(sa *unix.RawSockaddrInet6) net.Addr {
	switch sa.Family {
	case unix.AF_INET:
		s4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&s4.Port))[:])
		return net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.AddrFrom4(s4.Addr), port))
	case unix.AF_INET6:
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:])
		return net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), port))
	}
	return &net.UDPAddr{}
}
