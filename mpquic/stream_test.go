package mpquic

import (
	"context"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// dialQuicGoServer starts a quic-go listener running serve on each
// accepted connection and dials it with mpquic.
func dialQuicGoServer(t *testing.T, ctx context.Context, qconf *quic.Config, serve func(*quic.Conn)) *Conn {
	t.Helper()
	stls, ctls := testTLS(t)
	l, err := quic.ListenAddr("127.0.0.1:0", stls, qconf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept(ctx)
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	c, err := DialAddr(ctx, l.Addr().String(), ctls, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseWithError(0, "") })
	return c
}

// RESET_STREAM and STOP_SENDING both ways with quic-go: the codes arrive.
func TestStreamCancelInterop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := make(chan error, 4)
	c := dialQuicGoServer(t, ctx, nil, func(qc *quic.Conn) {
		for {
			s, err := qc.AcceptStream(ctx)
			if err != nil {
				return
			}
			go func() {
				b := make([]byte, 1)
				if _, err := io.ReadFull(s, b); err != nil {
					got <- err
					return
				}
				switch b[0] {
				case 'r': // the server resets its sending side
					s.CancelWrite(0x77)
				case 's': // the server stops our sending side
					s.CancelRead(0x55)
				case 'x': // the server reads until our reset
					_, err := io.Copy(io.Discard, s)
					got <- err
				}
			}()
		}
	})

	s, err := c.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Write([]byte{'r'})
	_, err = io.ReadAll(s)
	var se *StreamError
	if !errors.As(err, &se) || se.Code != 0x77 || !se.Remote {
		t.Fatalf("read after the peer's RESET_STREAM: %v", err)
	}

	s, _ = c.OpenStream(ctx)
	s.Write([]byte{'s'})
	deadline := time.Now().Add(5 * time.Second)
	for err = nil; err == nil && time.Now().Before(deadline); {
		_, err = s.Write(make([]byte, 1000))
		time.Sleep(time.Millisecond)
	}
	if !errors.As(err, &se) || se.Code != 0x55 {
		t.Fatalf("write after the peer's STOP_SENDING: %v", err)
	}

	s, _ = c.OpenStream(ctx)
	s.Write([]byte{'x'})
	s.Write(make([]byte, 5000))
	s.CancelWrite(0x99)
	var qe *quic.StreamError
	if err := <-got; !errors.As(err, &qe) || qe.ErrorCode != 0x99 {
		t.Fatalf("quic-go read after our RESET_STREAM: %v", err)
	}
}

// MAX_STREAMS: with the peer allowing 2 streams, a third OpenStream waits
// until one is finished, and the limit then rises.
func TestStreamLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := dialQuicGoServer(t, ctx, &quic.Config{MaxIncomingStreams: 2}, func(qc *quic.Conn) {
		for {
			s, err := qc.AcceptStream(ctx)
			if err != nil {
				return
			}
			go func() { io.Copy(s, s); s.Close() }()
		}
	})
	s1, _ := c.OpenStream(ctx)
	s2, _ := c.OpenStream(ctx)
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	if _, err := c.OpenStream(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a third stream beyond MAX_STREAMS 2: %v", err)
	}
	for _, s := range []*Stream{s1, s2} {
		s.Write([]byte("x"))
		s.Close()
		if b, err := io.ReadAll(s); err != nil || string(b) != "x" {
			t.Fatalf("echo %q %v", b, err)
		}
	}
	if _, err := c.OpenStream(ctx); err != nil {
		t.Fatalf("after two streams finished: %v", err)
	}
}

// A read deadline ends a waiting Read with os.ErrDeadlineExceeded; the
// peer's application close reaches both the connection and its streams.
func TestDeadlineAndApplicationClose(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	closeNow := make(chan *quic.Conn, 1)
	c := dialQuicGoServer(t, ctx, nil, func(qc *quic.Conn) {
		s, err := qc.AcceptStream(ctx)
		if err != nil {
			return
		}
		io.ReadFull(s, make([]byte, 1))
		closeNow <- qc
	})
	s, _ := c.OpenStream(ctx)
	s.Write([]byte{1})
	s.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := s.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v", err)
	}
	s.SetReadDeadline(time.Time{})
	qc := <-closeNow
	qc.CloseWithError(0x42, "bye")
	_, err := s.Read(make([]byte, 1))
	var ae *ApplicationCloseError
	if !errors.As(err, &ae) || ae.Code != 0x42 || !ae.Remote || ae.Reason != "bye" {
		t.Fatalf("read after the peer closed: %v", err)
	}
	<-c.Done()
}

// Idle timeout: a peer that goes silent ends the connection with
// ErrIdleTimeout after the negotiated timeout.
func TestIdleTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stls, ctls := testTLS(t)
	lc := newLossyConn(t, 0, 0)
	l, err := Listen(lc, stls, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := DialAddr(ctx, lc.LocalAddr().String(), ctls, &Config{MaxIdleTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	lc.mu.Lock()
	lc.loss = 1 // the server goes silent
	lc.mu.Unlock()
	start := time.Now()
	<-c.Done()
	if el := time.Since(start); !errors.Is(c.Err(), ErrIdleTimeout) || el < 250*time.Millisecond || el > 5*time.Second {
		t.Fatalf("ended with %v after %v, want the idle timeout after ~300ms (at least 3 PTO)", c.Err(), el)
	}
}
