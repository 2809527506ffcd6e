package mpquic

import (
	"context"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// flood sends datagrams made by gen to target from senders
// goroutines, a new source port every 16 datagrams, as fast as they go,
// until ctx ends or max are sent; it returns how many were sent.
func flood(ctx context.Context, target net.Addr, senders, max int, gen func(buf []byte) []byte) int {
	var n atomic.Int64
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1500)
			for ctx.Err() == nil {
				c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
				if err != nil {
					return
				}
				for range 16 {
					if n.Add(1) > int64(max) {
						c.Close()
						return
					}
					c.WriteTo(gen(buf), target)
				}
				c.Close()
			}
		}()
	}
	wg.Wait()
	return int(min(n.Load(), int64(max)))
}

// TestListenerFlood: while two senders flood the listener with Initials
// for 3 s (bounded to 600,000 datagrams), a real client started during the
// flood completes its handshake and a transfer, the half-open connections
// and goroutines stay under the listener's caps, and a client after the
// flood is served as usual. Two floods: random bytes shaped like an
// Initial (they never decrypt), and a real ClientHello protected under a
// fresh connection ID each time (they decrypt and never complete).
func TestListenerFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3 s flood")
	}
	// 512 decryptable Initials, each to its own connection ID, made
	// beforehand (deriving keys is slow under -race) and sent in turn:
	// beyond the caps each is checked and answered again every time.
	hello := clientHelloPayload(t)
	ring := make([][]byte, 512)
	for i := range ring {
		ring[i] = sealInitial(t, randomID(8), randomID(8), nil, hello, 0)
	}
	var next atomic.Int64
	for _, tc := range []struct {
		name string
		gen  func(buf []byte) []byte
	}{
		{"undecryptable", fakeInitial},
		{"decryptable", func([]byte) []byte { return ring[next.Add(1)%int64(len(ring))] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			stls, ctls := testTLS(t)
			l := listenLoopback(t, stls, nil)
			go echoServe(ctx, l)
			base := runtime.NumGoroutine()

			fctx, stop := context.WithTimeout(ctx, 3*time.Second)
			defer stop()
			sentc := make(chan int, 1)
			go func() { sentc <- flood(fctx, l.Addr(), 2, 600000, tc.gen) }()
			var peakHalf, peakG int
			watch := make(chan struct{})
			go func() {
				defer close(watch)
				for fctx.Err() == nil {
					peakHalf = max(peakHalf, l.Stats().HalfOpen)
					peakG = max(peakG, runtime.NumGoroutine())
					time.Sleep(10 * time.Millisecond)
				}
			}()

			time.Sleep(500 * time.Millisecond)
			dctx, dcancel := context.WithTimeout(ctx, 15*time.Second)
			start := time.Now()
			c, err := DialAddr(dctx, l.Addr().String(), ctls, nil)
			if err != nil {
				dcancel()
				t.Fatalf("client during the flood: %v", err)
			}
			echo(t, dctx, func(ctx context.Context) (io.ReadWriteCloser, error) { return c.OpenStream(ctx) }, testData(256<<10, 7), 0, nil)
			during := time.Since(start)
			c.CloseWithError(0, "")
			dcancel()

			sent := <-sentc
			<-watch
			s := l.Stats()
			t.Logf("%s: %d Initials sent in 3 s; client done in %v; peak half-open %d, goroutines %d (base %d); %+v",
				tc.name, sent, during.Round(time.Millisecond), peakHalf, peakG, base, s)
			if sent < 10000 {
				t.Fatalf("only %d Initials sent: no flood to test against", sent)
			}
			conf, _ := (*Config)(nil).withDefaults()
			if peakHalf > conf.MaxHalfOpen {
				t.Errorf("peak half-open %d above the cap %d", peakHalf, conf.MaxHalfOpen)
			}
			// Two goroutines a half-open connection (its own and
			// crypto/tls's handshake), plus the flood's and the test's.
			if peakG > base+2*peakHalf+16 {
				t.Errorf("peak goroutines %d, base %d, peak half-open %d: more than two a connection", peakG, base, peakHalf)
			}
			if tc.name == "undecryptable" && (s.Undecryptable == 0 || s.HalfOpen != 0) {
				t.Errorf("undecryptable flood: %+v", s)
			}
			if tc.name == "decryptable" && s.RetriesSent == 0 {
				t.Errorf("decryptable flood answered with no Retry: %+v", s)
			}

			// After the flood: served as usual.
			actx, acancel := context.WithTimeout(ctx, 15*time.Second)
			defer acancel()
			c2, err := DialAddr(actx, l.Addr().String(), ctls, nil)
			if err != nil {
				t.Fatalf("client after the flood: %v", err)
			}
			defer c2.CloseWithError(0, "")
			echo(t, actx, func(ctx context.Context) (io.ReadWriteCloser, error) { return c2.OpenStream(ctx) }, testData(256<<10, 8), 0, nil)
		})
	}
}
