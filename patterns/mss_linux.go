package patterns

import "syscall"

// setMSS clamps a TCP socket's maximum segment size before connect: the
// SYN advertises it, so the peer's segments stay small too.
func setMSS(c syscall.RawConn, mss int) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG, mss)
	}); err != nil {
		return err
	}
	return serr
}
