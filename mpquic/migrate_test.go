package mpquic

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestMigrate: a single-path client moves to a new socket (RFC 9000
// §9.2) mid-connection: Migrate returns once the new path is validated,
// the server sends to the new address, streams carry on, and the old
// socket (the connection's own) is closed after the grace. Misuse is
// refused: a server, a multipath connection, a closed one.
func TestMigrate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stls, ctls := testTLS(t)
	ln := listenLoopback(t, stls, &Config{DisableMultipath: true})
	accepted := make(chan *Conn, 1)
	go func() {
		c, err := ln.Accept(ctx)
		if err != nil {
			return
		}
		accepted <- c
		for {
			s, err := c.AcceptStream(ctx)
			if err != nil {
				return
			}
			go func() { io.Copy(s, s); s.Close() }()
		}
	}()
	old, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	c, err := Dial(ctx, old, ln.Addr(), ctls, &Config{DisableMultipath: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseWithError(0, "")
	open := func(ctx context.Context) (io.ReadWriteCloser, error) { return c.OpenStream(ctx) }
	exchange(t, ctx, open, make([]byte, 100<<10))
	sc := <-accepted
	if err := sc.Migrate(ctx, old); err == nil {
		t.Error("a server's Migrate succeeded")
	}

	moved, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer moved.Close()
	if err := c.Migrate(ctx, moved); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if got := c.LocalAddr().String(); got != moved.LocalAddr().String() {
		t.Errorf("LocalAddr %s after the move, want %s", got, moved.LocalAddr())
	}
	exchange(t, ctx, open, make([]byte, 100<<10))
	if ra := sc.PathStats()[0].RemoteAddr.String(); ra != moved.LocalAddr().String() {
		t.Errorf("the server sends to %s, not the client's new address %s", ra, moved.LocalAddr())
	}
	// The old socket was the caller's: after the grace it is no longer
	// read (a datagram to it stays there), and not closed.
	time.Sleep(oldSocketGrace + 100*time.Millisecond)
	if _, err := old.WriteTo([]byte("x"), old.LocalAddr()); err != nil {
		t.Errorf("the caller's old socket was closed: %v", err)
	}
	old.SetReadDeadline(time.Now().Add(time.Second))
	if _, _, err := old.ReadFrom(make([]byte, 16)); err != nil {
		t.Errorf("the old socket's datagram was taken by the connection: %v", err)
	}
	exchange(t, ctx, open, []byte("after"))

	c.CloseWithError(0, "")
	if err := c.Migrate(ctx, moved); !errors.Is(err, ErrClosed) {
		t.Errorf("Migrate after close: %v, want ErrClosed", err)
	}
}

// TestMigrateMultipathRefused: a multipath connection adds paths instead.
func TestMigrateMultipathRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stls, ctls := testTLS(t)
	ln := listenLoopback(t, stls, nil)
	go echoServe(ctx, ln)
	c, err := DialAddr(ctx, ln.Addr().String(), ctls, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseWithError(0, "")
	exchange(t, ctx, func(ctx context.Context) (io.ReadWriteCloser, error) { return c.OpenStream(ctx) }, []byte("x"))
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if !c.Multipath() {
		t.Fatal("multipath not negotiated")
	}
	if err := c.Migrate(ctx, pc); err == nil {
		t.Error("a multipath connection's Migrate succeeded")
	}
}
