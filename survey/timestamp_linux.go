package survey

import (
	"net"
	"net/netip"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kernel receive timestamps (SO_TIMESTAMPNS) date a reply when it reached
// the host, not when our goroutine got to run: on a loaded machine the
// difference is milliseconds.
//
// The receive buffer is raised too: one raw socket takes every reply of a
// path, and a burst arriving while the reader is descheduled must not be
// dropped (it would count as an unresponsive target).
func enableRxTimestamps(c *net.IPConn) {
	if rc, err := c.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
			if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rawRcvBuf) != nil {
				_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, rawRcvBuf)
			}
		})
	}
}

const rawRcvBuf = 8 << 20

const oobSize = 128

// readStamped reads one packet's transport payload (ReadMsgIP, unlike
// ReadFrom, leaves the IPv4 header in place) and its kernel arrival time
// (time.Now() when the kernel gave none).
func readStamped(c *net.IPConn, buf, oob []byte) ([]byte, netip.Addr, time.Time, error) {
	n, oobn, _, from, err := c.ReadMsgIP(buf, oob)
	at := time.Now()
	if err != nil {
		return nil, netip.Addr{}, at, err
	}
	var a netip.Addr
	if from != nil {
		a, _ = netip.AddrFromSlice(from.IP)
	}
	payload := buf[:n]
	if a.Unmap().Is4() {
		if n < 20 || payload[0]>>4 != 4 || int(payload[0]&0x0f)*4 > n {
			return nil, a.Unmap(), at, nil
		}
		payload = payload[int(payload[0]&0x0f)*4:]
	}
	if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
		for _, m := range msgs {
			if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= int(unsafe.Sizeof(unix.Timespec{})) {
				ts := (*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
				at = time.Unix(int64(ts.Sec), int64(ts.Nsec))
			}
		}
	}
	return payload, a.Unmap(), at, nil
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
