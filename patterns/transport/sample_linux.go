package transport

import (
	"net"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Socket options of include/uapi/linux/mptcp.h.
const (
	solMPTCP      = 284
	mptcpInfo     = 1
	mptcpFullInfo = 4
	// maxSubflows sampled per connection; the kernel reports the real count.
	maxSubflows = 8
)

func getsockopt(fd uintptr, level, opt int, buf []byte) (int, error) {
	l := uint32(len(buf))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, uintptr(level), uintptr(opt),
		uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return 0, e
	}
	return int(l), nil
}

func sampleTCP(c *net.TCPConn) State {
	rc, err := c.SyscallConn()
	if err != nil {
		return errState(err.Error())
	}
	buf := make([]byte, 256)
	var n int
	var serr error
	if err := rc.Control(func(fd uintptr) { n, serr = getsockopt(fd, unix.IPPROTO_TCP, unix.TCP_INFO, buf) }); err != nil {
		return errState(err.Error())
	}
	if serr != nil {
		return errState("TCP_INFO: " + serr.Error())
	}
	ti := DecodeTCPInfo(buf[:n])
	return State{Key: keyTCPInfo, Data: &ti}
}

// sampleMPTCP reads MPTCP_FULL_INFO (connection info plus every subflow's
// addresses and tcp_info in one consistent call); kernels before 6.5 only
// have MPTCP_INFO. On a connection that fell back to TCP the MPTCP options
// fail and TCP_INFO is reported instead.
func sampleMPTCP(c *net.TCPConn) State {
	rc, err := c.SyscallConn()
	if err != nil {
		return errState(err.Error())
	}
	var st State
	cerr := rc.Control(func(fd uintptr) {
		hdr := make([]byte, FullInfoLen)
		sf := make([]byte, maxSubflows*SubflowInfoLen)
		ti := make([]byte, maxSubflows*TCPInfoLen)
		ne := func(o int, v uint32) { *(*uint32)(unsafe.Pointer(&hdr[o])) = v }
		ne(4, TCPInfoLen)
		ne(12, SubflowInfoLen)
		ne(20, maxSubflows)
		*(*uint64)(unsafe.Pointer(&hdr[24])) = uint64(uintptr(unsafe.Pointer(&sf[0])))
		*(*uint64)(unsafe.Pointer(&hdr[32])) = uint64(uintptr(unsafe.Pointer(&ti[0])))
		n, err := getsockopt(fd, solMPTCP, mptcpFullInfo, hdr)
		runtime.KeepAlive(sf)
		runtime.KeepAlive(ti)
		if err == nil {
			s, derr := DecodeFullInfo(hdr[:n], sf, ti)
			if derr != nil {
				st.Err = derr.Error()
			}
			st.Key, st.Data = keyMPTCP, &s
			return
		}
		buf := make([]byte, MPTCPInfoLen)
		if n, err2 := getsockopt(fd, solMPTCP, mptcpInfo, buf); err2 == nil {
			if info, derr := DecodeMPTCPInfo(buf[:n]); derr == nil {
				st.Key, st.Data = keyMPTCP, &MPTCPState{Info: info, NumSubflow: int(info.Subflows) + 1}
				return
			}
		}
		tb := make([]byte, 256)
		if n, err3 := getsockopt(fd, unix.IPPROTO_TCP, unix.TCP_INFO, tb); err3 == nil {
			t := DecodeTCPInfo(tb[:n])
			st.Key, st.Data = keyTCPInfo, &t
			return
		}
		st.Err = "MPTCP_FULL_INFO: " + err.Error()
	})
	if cerr != nil {
		return errState(cerr.Error())
	}
	return st
}
