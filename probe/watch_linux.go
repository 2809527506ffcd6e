package probe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// rtnetlink multicast groups: everything a Path is made of (link state,
// addresses, the default route).
const watchGroups = unix.RTMGRP_LINK | unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR |
	unix.RTMGRP_IPV4_ROUTE | unix.RTMGRP_IPV6_ROUTE

// WatchChanges subscribes to the kernel's rtnetlink notifications for links,
// addresses and routes. The channel (buffered, 1) receives the time a change
// was read; a burst of changes while the caller is busy coalesces into one
// pending value holding the earliest time. Lost notifications (the socket
// buffer overflowed: ENOBUFS) are reported as a change. The channel is
// closed when ctx is done or the socket fails; the socket is closed before
// that, so draining the channel after cancelling ctx waits for the reader.
//
// The socket belongs to the network namespace of the calling OS thread at
// the time of the call: a caller that switched a locked thread into another
// namespace must call WatchChanges from that thread.
func WatchChanges(ctx context.Context) (<-chan time.Time, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("rtnetlink socket: %w", err)
	}
	// A link going down withdraws its addresses and routes in one burst; a
	// larger buffer makes overflow rare (best effort: capped by rmem_max).
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: watchGroups}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("rtnetlink bind: %w", err)
	}
	// A non-blocking fd in an os.File goes through the runtime poller, so
	// Close wakes a pending Read: that is how ctx ends the reader.
	f := os.NewFile(uintptr(fd), "rtnetlink")
	stop := context.AfterFunc(ctx, func() { f.Close() })
	ch := make(chan time.Time, 1)
	go func() {
		defer close(ch)
		defer stop()
		defer f.Close()
		buf := make([]byte, 64<<10)
		for {
			n, err := f.Read(buf)
			if (err != nil && !errors.Is(err, unix.ENOBUFS)) || (err == nil && n == 0) {
				return
			}
			select {
			case ch <- time.Now():
			default: // a change is already pending: its re-discovery sees this one too
			}
		}
	}()
	return ch, nil
}
