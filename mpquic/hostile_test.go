package mpquic

import (
	"context"
	"io"
	"testing"
	"time"
)

// TestConnectionSendBudget: a peer opens 20 streams, asks for data on each
// and reads none. The server's Writes queue at most ConnectionSendBuffer
// unsent over all of them (not 20 x SendBuffer), the count agrees with
// the streams' buffers, and once the peer reads every stream completes.
func TestConnectionSendBudget(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stls, ctls := testTLS(t)
	const perStream, streams, size = 256 << 10, 20, 2 << 20
	l := listenLoopback(t, stls, &Config{SendBuffer: perStream})
	server := make(chan *Conn, 1)
	go func() {
		c, err := l.Accept(ctx)
		if err != nil {
			return
		}
		server <- c
		for {
			s, err := c.AcceptStream(ctx)
			if err != nil {
				return
			}
			go func() {
				s.Read(make([]byte, 1))
				s.Write(testData(size, byte(s.StreamID())))
				s.Close()
			}()
		}
	}()
	c, err := DialAddr(ctx, l.Addr().String(), ctls, &Config{StreamReceiveWindow: 32 << 10, ConnectionReceiveWindow: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseWithError(0, "")
	var ss []*Stream
	for range streams {
		s, err := c.OpenStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s.Write([]byte{1})
		s.Close()
		ss = append(ss, s)
	}
	sc := <-server
	budget := sc.conf.ConnectionSendBuffer
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		sc.mu.Lock()
		sum := 0
		for _, s := range sc.streams {
			sum += int(s.send.unsent())
		}
		unsent := sc.unsent
		sc.mu.Unlock()
		if unsent != sum || unsent > budget+streams*sendFloor {
			t.Fatalf("server holds %d bytes unsent (counted %d), budget %d", sum, unsent, budget)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, s := range ss {
		s.SetReadDeadline(time.Now().Add(30 * time.Second))
		n, err := io.Copy(io.Discard, s)
		if err != nil || n != size {
			t.Fatalf("stream %d: %d of %d bytes once read: %v", s.StreamID(), n, size, err)
		}
	}
}
