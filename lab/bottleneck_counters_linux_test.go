//go:build linux && !race

package lab_test

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/mptester/mptester/internal/nstest"
)

// TestUDPRcvbufErrorsCounted plants the fault the shared-bottleneck
// test's UDP half of its "lost outside the queue" check looks for: a
// receiver too slow for its socket buffer. Datagrams sent over loopback
// in a fresh namespace to a socket with the smallest buffer, and read
// only afterwards, are each either read or counted by udpRcvbufErrors,
// for IPv4 and IPv6 alike: read + counted = sent, exactly.
func TestUDPRcvbufErrorsCounted(t *testing.T) {
	nstest.RequireRoot(t)
	ns := nstest.New(t)
	for _, addr := range []string{"127.0.0.1", "::1"} {
		t.Run(addr, func(t *testing.T) {
			var rc, sc *net.UDPConn
			inNS(t, ns.Name, func() (err error) {
				if rc, err = net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(addr)}); err != nil {
					return err
				}
				// The kernel's floor (SOCK_MIN_RCVBUF): a few datagrams.
				if err = rc.SetReadBuffer(1); err != nil {
					return err
				}
				sc, err = net.DialUDP("udp", nil, rc.LocalAddr().(*net.UDPAddr))
				return err
			})
			defer rc.Close()
			defer sc.Close()
			const sent = 200
			before := udpRcvbufErrors(t, ns.Name)
			msg := make([]byte, 1200)
			for range sent {
				if _, err := sc.Write(msg); err != nil {
					t.Fatal(err)
				}
			}
			read := 0
			buf := make([]byte, 2000)
			for {
				rc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
				if _, err := rc.Read(buf); err != nil {
					if !errors.Is(err, os.ErrDeadlineExceeded) {
						t.Fatal(err)
					}
					break
				}
				read++
			}
			counted := udpRcvbufErrors(t, ns.Name) - before
			t.Logf("%d datagrams sent, %d read, %d counted as receive-buffer drops", sent, read, counted)
			if read+int(counted) != sent || counted == 0 {
				t.Errorf("%d datagrams sent, %d read and %d counted as receive-buffer drops: want every one either read or counted, some counted", sent, read, counted)
			}
		})
	}
}
