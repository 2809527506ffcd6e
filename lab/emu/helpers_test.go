package emu

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// memDev is an in-memory packet device: the link reads what the test puts
// in `in` and writes into `out`, stamped with the write time.
type memDev struct {
	in      chan []byte
	out     chan frame
	closed  chan struct{}
	once    sync.Once
	dropped atomic.Int64 // out full, like a TUN whose reader is slow
}

type frame struct {
	b []byte
	t time.Time
}

func newMemDev() *memDev {
	return &memDev{in: make(chan []byte, 1<<16), out: make(chan frame, 1<<17), closed: make(chan struct{})}
}

func (d *memDev) Read(p []byte) (int, error) {
	select {
	case b := <-d.in:
		return copy(p, b), nil
	case <-d.closed:
		return 0, os.ErrClosed
	}
}

func (d *memDev) Write(p []byte) (int, error) {
	f := frame{bytes.Clone(p), time.Now()}
	select {
	case <-d.closed:
		return 0, os.ErrClosed
	default:
	}
	select {
	case d.out <- f:
	default:
		d.dropped.Add(1)
	}
	return len(p), nil
}

// port is the test's side of a device: it injects packets into the link
// and receives what the link wrote, stamped with the write time.
type port interface {
	send(p []byte) time.Time
	frames() <-chan frame
}

func (d *memDev) send(p []byte) time.Time {
	t := time.Now()
	d.in <- p
	return t
}

func (d *memDev) frames() <-chan frame { return d.out }

func (d *memDev) Close() error {
	d.once.Do(func() { close(d.closed) })
	return nil
}

var (
	cliAddr = netip.MustParseAddr("198.18.1.2")
	srvAddr = netip.MustParseAddr("198.18.200.1")
	cli6    = netip.MustParseAddr("fd00:1::2")
)

// udpPacket builds a real IPv4 or IPv6 UDP packet of total length size
// (at least header+8) carrying seq in the first 8 payload bytes.
func udpPacket(src, dst netip.Addr, size int, seq uint64) []byte {
	hl := 20
	if src.Is6() {
		hl = 40
	}
	size = max(size, hl+8+8)
	p := make([]byte, size)
	if src.Is4() {
		p[0] = 0x45
		binary.BigEndian.PutUint16(p[2:], uint16(size))
		p[8] = 64
		p[9] = 17
		s, d := src.As4(), dst.As4()
		copy(p[12:], s[:])
		copy(p[16:], d[:])
		var sum uint32
		for i := 0; i < 20; i += 2 {
			sum += uint32(binary.BigEndian.Uint16(p[i:]))
		}
		for sum > 0xffff {
			sum = sum&0xffff + sum>>16
		}
		binary.BigEndian.PutUint16(p[10:], ^uint16(sum))
	} else {
		p[0] = 0x60
		binary.BigEndian.PutUint16(p[4:], uint16(size-40))
		p[6] = 17
		p[7] = 64
		s, d := src.As16(), dst.As16()
		copy(p[8:], s[:])
		copy(p[24:], d[:])
	}
	u := p[hl:]
	binary.BigEndian.PutUint16(u[0:], 40000)
	binary.BigEndian.PutUint16(u[2:], 9)
	binary.BigEndian.PutUint16(u[4:], uint16(size-hl))
	binary.BigEndian.PutUint64(u[8:], seq)
	return p
}

func pktSeq(p []byte) uint64 {
	hl := 20
	if p[0]>>4 == 6 {
		hl = 40
	}
	return binary.BigEndian.Uint64(p[hl+8:])
}

// testLink is a running Link between two devices driven through ports.
type testLink struct {
	*Link
	cli, inet port
	done      chan error
}

// startLink runs a Link between in-memory devices.
func startLink(t testing.TB, seed int64) *testLink {
	t.Helper()
	cli, inet := newMemDev(), newMemDev()
	return runLink(t, seed, cli, inet, cli, inet)
}

func runLink(t testing.TB, seed int64, cdev, idev io.ReadWriteCloser, cli, inet port) *testLink {
	tl := &testLink{Link: NewLink("test0", cdev, idev, seed), cli: cli, inet: inet, done: make(chan error, 1)}
	go func() { tl.done <- tl.Run(context.Background()) }()
	t.Cleanup(func() {
		tl.Close()
		select {
		case err := <-tl.done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("Run did not return after Close")
		}
	})
	return tl
}

// devs returns the device the test writes into and the one it reads from.
func (tl *testLink) devs(dir Direction) (in, out port) {
	if dir == Up {
		return tl.cli, tl.inet
	}
	return tl.inet, tl.cli
}

// collect reads frames from d until n arrive or timeout passes.
func collect(d port, n int, timeout time.Duration) []frame {
	var got []frame
	deadline := time.After(timeout)
	for len(got) < n {
		select {
		case f := <-d.frames():
			got = append(got, f)
		case <-deadline:
			return got
		}
	}
	return got
}

// drainNow reads the frames already written.
func drainNow(d port) []frame {
	var got []frame
	for {
		select {
		case f := <-d.frames():
			got = append(got, f)
		default:
			return got
		}
	}
}

// drain reads frames until none arrives for quiet.
func drain(d port, quiet time.Duration) []frame {
	var got []frame
	for {
		select {
		case f := <-d.frames():
			got = append(got, f)
		case <-time.After(quiet):
			return got
		}
	}
}

// paced sends n packets spaced by gap, returning the send times by seq.
func paced(d port, n int, gap time.Duration, mk func(seq uint64) []byte) []time.Time {
	ts := make([]time.Time, n)
	start := time.Now()
	for i := range n {
		if w := time.Until(start.Add(time.Duration(i) * gap)); w > 0 {
			time.Sleep(w)
		}
		ts[i] = d.send(mk(uint64(i)))
	}
	return ts
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
