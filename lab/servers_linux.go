package lab

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
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
	return l.startUDPEcho()
}

// startUDPEcho answers UDP datagrams on PortEcho of every Internet address
// with the same payload, from the address the datagram was sent to
// (IP_PKTINFO / IPV6_RECVPKTINFO), as a server on an AnyIP prefix must.
func (l *Lab) startUDPEcho() error {
	pc4, err := l.ListenUDPNet("udp4", fmt.Sprintf("0.0.0.0:%d", PortEcho))
	if err != nil {
		return fmt.Errorf("lab udp echo: %w", err)
	}
	p4 := ipv4.NewPacketConn(pc4)
	if err := p4.SetControlMessage(ipv4.FlagDst, true); err != nil {
		return err
	}
	pc6, err := l.ListenUDPNet("udp6", fmt.Sprintf("[::]:%d", PortEcho))
	if err != nil {
		return fmt.Errorf("lab udp echo: %w", err)
	}
	p6 := ipv6.NewPacketConn(pc6)
	if err := p6.SetControlMessage(ipv6.FlagDst, true); err != nil {
		return err
	}
	l.Go(func(ctx context.Context) {
		buf := make([]byte, 65536)
		for {
			n, cm, src, err := p4.ReadFrom(buf)
			if err != nil {
				return
			}
			var out *ipv4.ControlMessage
			if cm != nil {
				out = &ipv4.ControlMessage{Src: cm.Dst}
			}
			_, _ = p4.WriteTo(buf[:n], out, src)
		}
	})
	l.Go(func(ctx context.Context) {
		buf := make([]byte, 65536)
		for {
			n, cm, src, err := p6.ReadFrom(buf)
			if err != nil {
				return
			}
			var out *ipv6.ControlMessage
			if cm != nil {
				out = &ipv6.ControlMessage{Src: cm.Dst}
			}
			_, _ = p6.WriteTo(buf[:n], out, src)
		}
	})
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
