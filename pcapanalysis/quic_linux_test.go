//go:build linux && !race

package pcapanalysis

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/certs"
)

// tcpdumpArgs is the command line of a capture that loses nothing:
// headers only, a 32 MiB buffer, packets handed over at once.
func tcpdumpArgs(iface, file string, filter ...string) []string {
	return append([]string{"tcpdump", "-i", iface, "-s", "200", "-B", "32768", "--immediate-mode", "-U", "-w", file}, filter...)
}

// startTcpdump starts cmd (tcpdump -w file) and waits until it listens. The
// returned stop waits until the file stops growing (tcpdump exits on
// SIGINT without reading what is still queued for it, and a loaded host
// lets it fall behind), ends it, and requires that it wrote every packet
// it received (dup 1; 0 skips the check: on lo the kernel hands a packet
// to the capture socket out and in, libpcap keeps one, and the count of
// what it received does not say how many it kept) and the kernel dropped
// none: a lossy capture is no truth. It returns the number of packets
// written.
func startTcpdump(t *testing.T, cmd *exec.Cmd, file string, dup int) func() int {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root to capture")
		}
		t.Skip("needs root to capture")
	}
	requireTool(t, "tcpdump")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && !strings.Contains(sc.Text(), "listening on") {
	}
	tail := make(chan string, 1)
	go func() {
		var b strings.Builder
		for sc.Scan() {
			b.WriteString(sc.Text() + "; ")
		}
		tail <- b.String()
	}()
	return func() int {
		var last int64 = -1
		for stable, deadline := 0, time.Now().Add(15*time.Second); stable < 4 && time.Now().Before(deadline); {
			time.Sleep(250 * time.Millisecond)
			if st, err := os.Stat(file); err == nil && st.Size() == last {
				stable++
			} else if err == nil {
				stable, last = 0, st.Size()
			}
		}
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		s := <-tail
		t.Logf("tcpdump: %s", s)
		var captured, received, dropped int
		fmt.Sscanf(s, "%d packets captured; %d packets received by filter; %d packets dropped by kernel", &captured, &received, &dropped)
		require.Zero(t, dropped, "tcpdump: %s", s)
		if dup > 0 {
			require.Equal(t, received, dup*captured, "tcpdump: %s", s)
		}
		return captured
	}
}

// TestLoopbackQUIC: three real quic-go connections on loopback, captured:
// three QUIC connections, one path each, every captured datagram assigned.
func TestLoopbackQUIC(t *testing.T) {
	cert, _, err := certs.SelfSigned([]string{"127.0.0.1"})
	require.NoError(t, err)
	ln, err := quic.ListenAddr("127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"t"}}, nil)
	require.NoError(t, err)
	defer ln.Close()
	port := ln.Addr().(*net.UDPAddr).Port
	file := filepath.Join(t.TempDir(), "lo.pcap")
	argv := tcpdumpArgs("lo", file, "udp", "port", strconv.Itoa(port))
	stop := startTcpdump(t, exec.Command(argv[0], argv[1:]...), file, 0)
	go func() {
		for {
			c, err := ln.Accept(context.Background())
			if err != nil {
				return
			}
			go func() {
				s, err := c.AcceptStream(context.Background())
				if err != nil {
					return
				}
				n, _ := io.Copy(io.Discard, s)
				fmt.Fprintf(s, "%d", n)
				s.Close()
			}()
		}
	}()
	const conns, size = 3, 200 << 10
	var ports []int
	for i := 0; i < conns; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := quic.DialAddr(ctx, ln.Addr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"t"}}, nil)
		require.NoError(t, err)
		ports = append(ports, c.LocalAddr().(*net.UDPAddr).Port)
		s, err := c.OpenStreamSync(ctx)
		require.NoError(t, err)
		_, err = s.Write(make([]byte, size))
		require.NoError(t, err)
		s.Close()
		b, err := io.ReadAll(s)
		require.NoError(t, err)
		require.Equal(t, strconv.Itoa(size), string(b))
		c.CloseWithError(0, "")
		cancel()
	}
	captured := stop()
	r, err := AnalyzeFile(context.Background(), file, Options{})
	require.NoError(t, err)
	require.Len(t, r.QUIC, conns)
	var packets int64
	for i, q := range r.QUIC {
		require.Len(t, q.Paths, 1)
		assert.Contains(t, q.Paths[0], fmt.Sprintf("127.0.0.1:%d", ports[i]), "connection %d's path", i)
		assert.Greater(t, q.Bytes, int64(size))
		assert.GreaterOrEqual(t, len(q.CIDs), 2)
		packets += q.Packets
	}
	assert.Equal(t, int64(captured), packets, "every captured datagram belongs to a connection")
	assert.Equal(t, 1, r.Summary.QUICPaths/conns)
}
