package mpquic

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/mptester/mptester/internal/linkstats"
)

// socketDrops is the kernel's count of datagrams it dropped at pc's
// socket before anyone read them (a full receive buffer: the drops column
// of /proc/net/udp and udp6, found by the socket's inode); ok is false
// when it cannot be read.
func socketDrops(t *testing.T, pc net.PacketConn) (drops uint64, ok bool) {
	t.Helper()
	sc, isSC := pc.(syscall.Conn)
	if !isSC {
		return 0, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var link string
	if err := rc.Control(func(fd uintptr) { link, _ = os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd)) }); err != nil {
		return 0, false
	}
	inode, found := strings.CutPrefix(link, "socket:[")
	if !found {
		return 0, false
	}
	inode = strings.TrimSuffix(inode, "]")
	for _, table := range []string{linkstats.ProcNet("udp"), linkstats.ProcNet("udp6")} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local rem st tx:rx tr:when retrnsmt uid timeout inode ref pointer drops
			fs := strings.Fields(sc.Text())
			if len(fs) >= 13 && fs[9] == inode {
				f.Close()
				n, err := strconv.ParseUint(fs[12], 10, 64)
				return n, err == nil
			}
		}
		f.Close()
	}
	return 0, false
}
