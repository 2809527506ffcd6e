//go:build !race

// The race detector multiplies memory: RSS bounds hold without it.

package mpquic

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mptester/mptester/internal/rsstest"
)

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
	if !rsstest.InFreshProcess(t) {
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

			rsstest.ResetPeak()
			base := rsstest.MB("VmRSS")
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
			peak := rsstest.MB("VmHWM")
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
