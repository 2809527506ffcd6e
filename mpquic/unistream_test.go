package mpquic

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// Unidirectional streams both ways against quic-go, beyond the initial
// limit (MAX_STREAMS for uni streams as they finish), and the errors of
// using one in the direction it does not have.
func TestUniStreamsQuicGo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stls, ctls := testTLS(t)
	l := listenLoopback(t, stls, &Config{MaxIncomingUniStreams: 2})
	got := make(chan string, 16)
	go serveEach(ctx, l.Accept, (*Conn).AcceptUniStream, func(s *Stream) {
		b, err := io.ReadAll(s)
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		if _, err := s.Write([]byte("x")); err == nil {
			got <- "error: write on the peer's uni stream succeeded"
			return
		}
		got <- string(b)
	})
	c, err := quic.DialAddr(ctx, l.Addr().String(), ctls, &quic.Config{MaxIdleTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseWithError(0, "")
	const n = 6 // three times mpquic's limit of 2
	for i := range n {
		s, err := c.OpenUniStreamSync(ctx)
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		s.Write([]byte{'a' + byte(i)})
		s.Close()
	}
	seen := map[string]bool{}
	for range n {
		select {
		case s := <-got:
			seen[s] = true
		case <-ctx.Done():
			t.Fatalf("got %v of %d streams", seen, n)
		}
	}
	for i := range n {
		if !seen[string(rune('a'+i))] {
			t.Errorf("stream %c missing: %v", 'a'+i, seen)
		}
	}

	// mpquic's side opens, quic-go's server reads.
	srv, err := quic.ListenAddr("127.0.0.1:0", stls, &quic.Config{MaxIdleTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	qgot := make(chan string, 4)
	go func() {
		sc, err := srv.Accept(ctx)
		if err != nil {
			return
		}
		for {
			s, err := sc.AcceptUniStream(ctx)
			if err != nil {
				return
			}
			b, _ := io.ReadAll(s)
			qgot <- string(b)
		}
	}()
	cc, err := DialAddr(ctx, srv.Addr().String(), ctls, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.CloseWithError(0, "")
	s, err := cc.OpenUniStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("control")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if n, err := s.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Errorf("read on our uni stream: %d, %v; want io.EOF", n, err)
	}
	select {
	case b := <-qgot:
		if b != "control" {
			t.Errorf("quic-go read %q", b)
		}
	case <-ctx.Done():
		t.Fatal("quic-go read no uni stream")
	}
}
