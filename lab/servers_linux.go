package lab

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// startServers opens the test servers on every Internet address (the
// listeners are bound to the wildcard, so AnyIP targets answer too).
func (l *Lab) startServers() error {
	for _, s := range []struct {
		port  int
		mptcp bool
		serve func(net.Conn)
	}{
		{PortHTTPS, false, drain},
		{PortHTTP, false, drain},
		{PortSink, true, sink},
		{PortSrc, true, source},
	} {
		ln, err := l.ListenTCP(fmt.Sprintf(":%d", s.port), s.mptcp)
		if err != nil {
			return fmt.Errorf("lab server on port %d: %w", s.port, err)
		}
		l.Go(func(ctx context.Context) { acceptLoop(ctx, ln, s.serve) })
	}
	return nil
}

func acceptLoop(ctx context.Context, ln net.Listener, serve func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go func() {
			defer c.Close()
			stop := context.AfterFunc(ctx, func() { c.Close() })
			defer stop()
			serve(c)
		}()
	}
}

// drain reads until EOF (or 30 s idle) and closes: enough for TCP-connect
// probes and HTTP-ish clients that only need the handshake.
func drain(c net.Conn) {
	buf := make([]byte, 4096)
	for {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.Read(buf); err != nil {
			return
		}
	}
}

// sink reads until the client half-closes, then reports the byte count.
func sink(c net.Conn) {
	n, _ := io.Copy(io.Discard, c)
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	_, _ = c.Write(b[:])
}

// source reads a byte count and sends that many bytes.
func source(c net.Conn) {
	var b [8]byte
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	n := int64(binary.BigEndian.Uint64(b[:]))
	buf := make([]byte, 64<<10)
	for n > 0 {
		k := int64(len(buf))
		if n < k {
			k = n
		}
		w, err := c.Write(buf[:k])
		if err != nil {
			return
		}
		n -= int64(w)
	}
}
