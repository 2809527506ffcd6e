package mpquic

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
)

// TestFloodSender is scripts/bench-mpquic-flood's sender, skipped unless
// MPTESTER_FLOOD_TARGET (host:port) is set. MPTESTER_FLOOD_KIND is "fake"
// (1,200 random bytes shaped like an Initial, as the attacker sent)
// or "hello" (a real ClientHello protected under a fresh connection ID:
// decryptable, never completed); MPTESTER_FLOOD_SECONDS (default 10) and
// MPTESTER_FLOOD_SENDERS (default 2) bound it. Each sender changes its
// source port every 16 datagrams and sends in batches (sendmmsg). It
// prints what it sent and the rate.
func TestFloodSender(t *testing.T) {
	target := os.Getenv("MPTESTER_FLOOD_TARGET")
	if target == "" {
		t.Skip("the flood benchmark's sender (scripts/bench-mpquic-flood)")
	}
	secs, _ := strconv.ParseFloat(envOr("MPTESTER_FLOOD_SECONDS", "10"), 64)
	senders, _ := strconv.Atoi(envOr("MPTESTER_FLOOD_SENDERS", "2"))
	kind := envOr("MPTESTER_FLOOD_KIND", "fake")
	raddr, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		t.Fatal(err)
	}
	// Datagrams made beforehand: the senders only send. A ring of 100,000
	// distinct connection IDs (the hello flood) outlasts every half-open
	// connection's and Retry's effect on the listener.
	ring := make([][]byte, 100000)
	hello := clientHelloPayload(t)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < len(ring); i += 4 {
				if kind == "hello" {
					ring[i] = sealInitial(t, randomID(8), randomID(8), nil, hello, 0)
				} else {
					ring[i] = fakeInitial(make([]byte, 1500))
				}
			}
		})
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs*float64(time.Second)))
	defer cancel()
	var sent atomic.Int64
	fmt.Println("flood start")
	start := time.Now()
	for s := range senders {
		wg.Go(func() {
			msgs := make([]ipv4.Message, 16)
			next := s * len(ring) / senders
			for ctx.Err() == nil {
				c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
				if err != nil {
					t.Error(err)
					return
				}
				for i := range msgs {
					msgs[i] = ipv4.Message{Buffers: [][]byte{ring[next%len(ring)]}, Addr: raddr}
					next++
				}
				n, _ := ipv4.NewPacketConn(c).WriteBatch(msgs, 0)
				sent.Add(int64(n))
				c.Close()
			}
		})
	}
	wg.Wait()
	d := time.Since(start)
	fmt.Printf("flood %s: sent %d in %.2f s (%.0f/s) from %d senders\n", kind, sent.Load(), d.Seconds(), float64(sent.Load())/d.Seconds(), senders)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
