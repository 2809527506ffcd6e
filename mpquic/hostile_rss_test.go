//go:build !race

// The race detector multiplies memory: RSS bounds hold without it.

package mpquic

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// rssMB is this process's resident set (VmRSS; peak: VmHWM) in MB, or
// the Go runtime's memory from the OS where /proc is missing.
func rssMB(field string) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, field+":"); ok {
				var kb float64
				if _, err := fmt.Sscanf(strings.TrimSpace(v), "%f kB", &kb); err == nil {
					return kb / 1024
				}
			}
		}
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.Sys) / (1 << 20)
}

// resetPeakRSS restarts VmHWM from the current RSS (Linux >= 4.0), so the
// peak read later is this test's.
func resetPeakRSS() {
	runtime.GC()
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// hostileFragments makes c send, after whatever it sends anyway, one-byte
// STREAM frames on stream 0 at offsets 10, 10+step, 10+2*step, ...
// (bytes 0..9 never come), up to total frames; it returns the count sent.
func hostileFragments(c *Conn, step uint64, total int64) *atomic.Int64 {
	var sent atomic.Int64
	off := uint64(10)
	one := []byte{0x55}
	c.mu.Lock()
	c.testFrames = func(b []byte, avail int) []byte {
		for avail-len(b) > 16 && sent.Load() < total {
			b = StreamFrame{StreamID: 0, Offset: off, Data: one}.Append(b)
			off += step
			sent.Add(1)
		}
		return b
	}
	c.mu.Unlock()
	return &sent
}

// TestHostileFragments is the reassembly attack on a server whose
// reader waits for bytes 0..9 that never come: up to 4 M one-byte STREAM
// frames on one connection. Sent back to back beyond the gap they are held
// as one piece and the connection holds; with a gap before every byte the
// server closes the connection with PROTOCOL_VIOLATION once the stream's
// pieces pass their limit (RFC 9000 §21.13). Either way the process
// (both ends, a fresh one) stays under 100 MB resident, and a
// well-behaved client's 2 MiB echo completes meanwhile. Before the fix the gapped case held ~150 bytes
// per byte received (667 MB for 4.29 M fragments).
func TestHostileFragments(t *testing.T) {
	if testing.Short() {
		t.Skip("4 M fragments")
	}
	if !inFreshProcess(t) {
		return
	}
	const total = 4 << 20
	for _, tc := range []struct {
		name      string
		step      uint64
		wantClose bool
	}{
		{"back to back beyond a gap", 1, false},
		{"a gap before every byte", 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			stls, ctls := testTLS(t)
			l := listenLoopback(t, stls, nil)
			go echoServe(ctx, l) // the hostile stream's Read waits for byte 0
			_, open := dialTest(t, ctx, l.Addr().String(), ctls)

			resetPeakRSS()
			base := rssMB("VmRSS")
			bad, err := DialAddr(ctx, l.Addr().String(), ctls, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer bad.CloseWithError(0, "")
			if _, err := bad.OpenStream(ctx); err != nil {
				t.Fatal(err)
			}
			sent := hostileFragments(bad, tc.step, total)
			bad.signal()
			echoed := make(chan struct{})
			go func() { defer close(echoed); exchange(t, ctx, open, testData(2<<20, 3)) }()
			start := time.Now()
			for sent.Load() < total && bad.Err() == nil && ctx.Err() == nil {
				time.Sleep(20 * time.Millisecond)
			}
			if !tc.wantClose {
				// The last frames reach the server: the connection still
				// answers a new stream's echo.
				s, err := bad.OpenStream(ctx)
				if err != nil {
					t.Fatal(err)
				}
				s.Write([]byte("x"))
				s.Close()
				s.SetReadDeadline(time.Now().Add(20 * time.Second))
				if _, err := s.Read(make([]byte, 1)); err != nil {
					t.Fatalf("after %d fragments the connection does not echo: %v", sent.Load(), err)
				}
			}
			elapsed := time.Since(start)
			<-echoed
			peak := rssMB("VmHWM")
			t.Logf("%d fragments in %v, RSS %.0f MB before, peak %.0f MB, connection: %v", sent.Load(), elapsed.Round(time.Millisecond), base, peak, bad.Err())
			if tc.wantClose {
				select {
				case <-bad.Done():
				case <-ctx.Done():
					t.Fatalf("%d fragments with gaps sent, the connection is still open", sent.Load())
				}
				var pe *PeerCloseError
				if err := bad.Err(); !errors.As(err, &pe) || pe.Err.Code != ProtocolViolation {
					t.Fatalf("closed with %v, want the server's PROTOCOL_VIOLATION", err)
				}
			} else if err := bad.Err(); err != nil {
				t.Fatalf("connection closed after %d fragments: %v", sent.Load(), err)
			}
			if sent.Load() < total && !tc.wantClose {
				t.Fatalf("only %d of %d fragments sent", sent.Load(), total)
			}
			if peak > 100 {
				t.Fatalf("peak RSS %.0f MB (%.0f MB before), want under 100 MB", peak, base)
			}
		})
	}
}

// inFreshProcess runs the calling test again in a new process of this
// test binary and reports whether the caller is that process: a resident
// set measured in a process that ran other tests first starts from their
// heap, and the garbage collector lets it grow in proportion.
func inFreshProcess(t *testing.T) bool {
	if os.Getenv("MPTESTER_FRESH_PROCESS") == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "MPTESTER_FRESH_PROCESS="+t.Name())
	out, err := cmd.CombinedOutput()
	t.Logf("in a fresh process:\n%s", out)
	if err != nil {
		t.Fatalf("the test in a fresh process: %v", err)
	}
	return false
}
