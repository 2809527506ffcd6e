package rawprobe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mptester/mptester/probe"
)

// Kernel receive timestamps (SO_TIMESTAMPNS) date a reply when it reached
// the host, not when our goroutine got to run: on a loaded machine the
// difference is milliseconds.
//
// The receive buffer is raised too: one raw socket takes every reply of a
// path, and a burst arriving while the reader is descheduled must not be
// dropped (it would count as an unresponsive target).
func enableRxTimestamps(c syscall.Conn) {
	if rc, err := c.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1)
		})
	}
	size := rawRcvBuf
	if testRcvBuf > 0 {
		size = testRcvBuf
	}
	probe.RaiseReceiveBuffer(c, size)
}

const rawRcvBuf = 8 << 20

const oobSize = 128

// openRaw opens a raw socket bound to path p's source address of family f
// (as probe.ListenRaw does) but outside Go's network poller: the probe
// loop only ever reads and writes it without blocking, and a socket in the
// poller's epoll set wakes the poller's thread for every reply that
// arrives, a context switch per reply for nothing.
func openRaw(_ context.Context, p probe.Path, f probe.Family, proto string) (rawConn, netip.Addr, error) {
	src, ok := p.SourceAddr(f)
	if !ok {
		return nil, netip.Addr{}, fmt.Errorf("%w: %s has no IPv%d address", probe.ErrNoSourceAddr, p.Name, f)
	}
	domain, num := unix.AF_INET, unix.IPPROTO_ICMP
	if proto == "tcp" {
		num = unix.IPPROTO_TCP
	}
	var sa unix.Sockaddr
	if f == probe.Family6 {
		domain = unix.AF_INET6
		if proto != "tcp" {
			num = unix.IPPROTO_ICMPV6
		}
		sa = &unix.SockaddrInet6{Addr: src.As16()}
	} else {
		sa = &unix.SockaddrInet4{Addr: src.As4()}
	}
	fd, err := unix.Socket(domain, unix.SOCK_RAW|unix.SOCK_CLOEXEC, num)
	if err != nil {
		return nil, netip.Addr{}, os.NewSyscallError("socket", err)
	}
	if err := probe.BindFD(uintptr(fd), p, f); err != nil {
		unix.Close(fd)
		return nil, netip.Addr{}, err
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, netip.Addr{}, os.NewSyscallError("bind", err)
	}
	return &rawFD{fd: fd}, src, nil
}

// rawFD is a socket outside the poller: Control runs f with its
// descriptor, which Close invalidates only once no f runs.
type rawFD struct {
	mu sync.RWMutex
	fd int // -1 once closed
}

var errRawClosed = errors.New("raw socket closed")

func (r *rawFD) SyscallConn() (syscall.RawConn, error) { return r, nil }

func (r *rawFD) Control(f func(fd uintptr)) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.fd < 0 {
		return errRawClosed
	}
	f(uintptr(r.fd))
	return nil
}

func (r *rawFD) Read(f func(fd uintptr) bool) error {
	return r.Control(func(fd uintptr) { f(fd) })
}

func (r *rawFD) Write(f func(fd uintptr) bool) error {
	return r.Control(func(fd uintptr) { f(fd) })
}

func (r *rawFD) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fd < 0 {
		return errRawClosed
	}
	err := unix.Close(r.fd)
	r.fd = -1
	return err
}

// rxQueue reads a socket's receive queue for the probe loop, which
// drains it at each of its wake-ups (at most every sendTick while probes
// are in flight): up to rxBatchLen packets per system call (recvmmsg),
// never blocking. Replies carry their kernel arrival time, so reading them
// a few milliseconds late costs no accuracy, and a receive goroutine woken
// by the poller would cost a wake-up per reply (or per poll). Each drain
// that empties the queue dates the watermark (h.empty); each packet's
// SO_RXQ_OVFL count, and on an empty queue (at most every dropCheckEvery)
// the socket's drop counter (SO_MEMINFO), report receive-queue drops.
type rxQueue struct {
	mu      sync.Mutex
	rc      syscall.RawConn
	h       rxHandler
	rb      *rxBatch
	drops   uint32
	checked time.Time // the drop count is known up to here
	filled  time.Time // the queue's fill last read
}

func startRx(c rawConn, h rxHandler) rxDrainer {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil
	}
	return &rxQueue{rc: rc, h: h, rb: newRxBatch(), checked: time.Now()}
}

// drain reads the queue until it is empty (or the socket is closed).
func (q *rxQueue) drain() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.rc.Control(q.read)
}

func (q *rxQueue) read(fd uintptr) {
	h := q.h
	for {
		before := time.Now()
		n, err := q.rb.read(fd)
		switch {
		case err == unix.EAGAIN:
			if before.Sub(q.checked) >= dropCheckEvery {
				if d, _, ok := sockMemInfo(fd); ok {
					now := time.Now()
					if d > q.drops {
						h.drops(uint64(d-q.drops), q.checked, now)
						q.drops = d
					}
					q.checked = now
				}
			}
			h.empty(minTime(before, q.checked))
			return
		case err == unix.EINTR:
			continue
		case err != nil:
			return // closed
		}
		now := time.Now()
		if n == rxBatchLen && now.Sub(q.filled) >= dropCheckEvery {
			// A full batch: a backlog. How full is the queue?
			if _, fill, ok := sockMemInfo(fd); ok {
				h.fill(fill)
			}
			q.filled = now
		}
		for i := range n {
			pkt, from, oob := q.rb.packet(i)
			at, ovfl, hasOvfl := parseRxControl(oob, now)
			if hasOvfl && ovfl > q.drops {
				h.drops(uint64(ovfl-q.drops), q.checked, at)
				q.drops = ovfl
			}
			if at.After(q.checked) {
				q.checked = at
			}
			if testRxHook != nil {
				testRxHook()
			}
			if pkt, a, ok := transportPayload(pkt, from); ok {
				h.packet(pkt, a, at, now)
			}
		}
	}
}

// writeBatch sends the packets of out, all due at one wake-up of the
// probe loop, in one pass over each socket without blocking: a send the
// kernel refuses (no buffer) fails rather than waits. Each packet is
// stamped just before its own sendmsg: with one sendmmsg for the batch
// the k-th packet would leave k times the kernel's transmit time (~14 µs
// here, waking the lab's emulator included) after the batch's one stamp,
// an error in its RTT; the system call itself costs ~1 µs.
func writeBatch(out []rawOut) {
	var ms [rxBatchLen]unix.Mmsghdr
	var iov [rxBatchLen]unix.Iovec
	var sa4 [rxBatchLen]unix.RawSockaddrInet4
	var sa6 [rxBatchLen]unix.RawSockaddrInet6
	for len(out) > 0 {
		// A run of packets on one socket, at most rxBatchLen.
		s := out[0].sock
		n := 1
		for n < len(out) && n < rxBatchLen && out[n].sock == s {
			n++
		}
		run := out[:n]
		out = out[n:]
		for i := range run {
			o := &run[i]
			iov[i].Base = &o.pkt[0]
			iov[i].SetLen(o.n)
			m := &ms[i].Hdr
			*m = unix.Msghdr{Iov: &iov[i]}
			m.SetIovlen(1)
			if o.dst.Is4() {
				sa4[i] = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: o.dst.As4()}
				m.Name, m.Namelen = (*byte)(unsafe.Pointer(&sa4[i])), unix.SizeofSockaddrInet4
			} else {
				sa6[i] = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: o.dst.As16()}
				m.Name, m.Namelen = (*byte)(unsafe.Pointer(&sa6[i])), unix.SizeofSockaddrInet6
			}
		}
		rc, err := s.conn.SyscallConn()
		if err != nil {
			for i := range run {
				run[i].sent, run[i].err = sentNow(), err
			}
			continue
		}
		cerr := rc.Control(func(fd uintptr) {
			for i := range run {
				run[i].sent = sentNow()
				if _, _, e := unix.RawSyscall(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(&ms[i].Hdr)), unix.MSG_DONTWAIT); e != 0 {
					run[i].err = e
				}
			}
		})
		if cerr != nil {
			for i := range run {
				run[i].err = cerr
			}
		}
	}
}

// dropCheckEvery spaces the SO_MEMINFO reads of a receive loop that keeps
// finding its queue empty (the per-packet SO_RXQ_OVFL count is free).
const dropCheckEvery = time.Millisecond

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// rxBatch is recvmmsg's state: rxBatch buffers, addresses and control
// messages, set up once.
const rxBatchLen = 32

type rxBatch struct {
	msgs  [rxBatchLen]unix.Mmsghdr
	iov   [rxBatchLen]unix.Iovec
	names [rxBatchLen]unix.RawSockaddrAny
	bufs  [rxBatchLen][1500]byte
	oob   [rxBatchLen][oobSize]byte
}

func newRxBatch() *rxBatch {
	rb := &rxBatch{}
	for i := range rb.msgs {
		rb.iov[i].Base = &rb.bufs[i][0]
		rb.iov[i].SetLen(len(rb.bufs[i]))
		m := &rb.msgs[i].Hdr
		m.Iov = &rb.iov[i]
		m.SetIovlen(1)
		m.Name = (*byte)(unsafe.Pointer(&rb.names[i]))
		m.Control = &rb.oob[i][0]
	}
	return rb
}

// The socket calls of the probing hot path (recvmmsg, sendmsg, the
// SO_MEMINFO read) never block (MSG_DONTWAIT), so they are raw system
// calls: an ordinary one tells the scheduler it may block, which wakes the
// runtime's monitor thread (sysmon) when it sleeps, and the monitor then
// polls every 20 µs for a while; that was 15% of the survey's CPU.

// read fills up to rxBatchLen packets without waiting.
func (rb *rxBatch) read(fd uintptr) (int, error) {
	for i := range rb.msgs {
		m := &rb.msgs[i].Hdr
		m.Namelen = unix.SizeofSockaddrAny
		m.SetControllen(oobSize)
		m.Flags = 0
	}
	n, _, e := unix.RawSyscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&rb.msgs[0])), rxBatchLen, unix.MSG_DONTWAIT, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// packet i of the last read: its bytes, sender and control messages.
func (rb *rxBatch) packet(i int) ([]byte, netip.Addr, []byte) {
	m := &rb.msgs[i]
	var a netip.Addr
	switch rb.names[i].Addr.Family {
	case unix.AF_INET:
		a = netip.AddrFrom4((*unix.RawSockaddrInet4)(unsafe.Pointer(&rb.names[i])).Addr)
	case unix.AF_INET6:
		a = netip.AddrFrom16((*unix.RawSockaddrInet6)(unsafe.Pointer(&rb.names[i])).Addr).Unmap()
	}
	return rb.bufs[i][:m.Len], a, rb.oob[i][:m.Hdr.Controllen]
}

// transportPayload strips the IPv4 header a raw IPv4 socket delivers.
func transportPayload(b []byte, a netip.Addr) ([]byte, netip.Addr, bool) {
	if !a.IsValid() {
		return nil, a, false
	}
	if a.Is4() {
		if len(b) < 20 || b[0]>>4 != 4 || int(b[0]&0x0f)*4 > len(b) {
			return nil, a, false
		}
		b = b[int(b[0]&0x0f)*4:]
	}
	return b, a, true
}

// parseRxControl returns the kernel arrival time (now when none) and the
// socket's drop count when the packet was queued (SO_RXQ_OVFL).
func parseRxControl(oob []byte, now time.Time) (at time.Time, drops uint32, hasDrops bool) {
	at = now
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return at, 0, false
	}
	for _, m := range msgs {
		if m.Header.Level != unix.SOL_SOCKET {
			continue
		}
		switch {
		case m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= int(unsafe.Sizeof(unix.Timespec{})):
			ts := (*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
			at = time.Unix(int64(ts.Sec), int64(ts.Nsec))
		case m.Header.Type == unix.SO_RXQ_OVFL && len(m.Data) >= 4:
			drops, hasDrops = *(*uint32)(unsafe.Pointer(&m.Data[0])), true
		}
	}
	return at, drops, hasDrops
}

// sockMemInfo is the socket's receive drop counter (SK_MEMINFO_DROPS) and
// how full its receive queue is (SK_MEMINFO_RMEM_ALLOC / RCVBUF).
func sockMemInfo(fd uintptr) (drops uint32, fill float64, ok bool) {
	var mi [unix.SK_MEMINFO_VARS]uint32
	l := uint32(unsafe.Sizeof(mi))
	_, _, e := unix.RawSyscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_MEMINFO, uintptr(unsafe.Pointer(&mi[0])), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 || l < 4*(unix.SK_MEMINFO_DROPS+1) {
		return 0, 0, false
	}
	if mi[unix.SK_MEMINFO_RCVBUF] > 0 {
		fill = float64(mi[unix.SK_MEMINFO_RMEM_ALLOC]) / float64(mi[unix.SK_MEMINFO_RCVBUF])
	}
	return mi[unix.SK_MEMINFO_DROPS], fill, true
}

// sentNow is the send time, on the same (wall) clock as kernel stamps.
func sentNow() time.Time { return time.Now().Round(0) }

// handshakeInfo is the kernel's RTT sample of the SYN/SYN-ACK exchange
// (tcpi_rtt right after connect is that one sample, in µs) and whether the
// TCP timestamp option was negotiated.
func handshakeInfo(c *net.TCPConn) (rtt time.Duration, timestamps, ok bool) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, false, false
	}
	var info *unix.TCPInfo
	var ierr error
	if err := rc.Control(func(fd uintptr) { info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil || ierr != nil || info == nil || info.Rtt == 0 {
		return 0, false, false
	}
	return time.Duration(info.Rtt) * time.Microsecond, info.Options&tcpiOptTimestamps != 0, true
}

// tcpiOptTimestamps is TCPI_OPT_TIMESTAMPS of linux/tcp.h (x/sys has no name for it).
const tcpiOptTimestamps = 1
