package mpquic

import (
	"context"
	"net"
	"testing"
	"time"
)

// A PATH_CHALLENGE probing a new address on an existing path (RFC 9000
// §9.1: a probe before migrating, or picoquic's client opening its second
// address on path 0) is answered at that address: "A PATH_RESPONSE frame
// MUST be sent on the network path where the PATH_CHALLENGE frame was
// received" (§8.2.2), padded to 1200 bytes (the probe was as large). The
// server neither migrates to the probe's address nor sends the response to
// the path's old one.
func TestPathResponseOnProbedAddress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mp := newMPPair(t, ctx, udpLoopback(t), nil, nil)
	c, srv, l := mp.c, mp.server(t), mp.l
	before := srv.RemoteAddr().String()

	// The probe: PATH_CHALLENGE and PADDING in a packet of path 0, sent
	// from another socket.
	probe := udpLoopback(t)
	data := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	c.mu.Lock()
	sp := c.spaces[spaceApp]
	pl := plan{sp: sp, si: spaceApp, pn: sp.nextPN, pnLen: PacketNumberLen(sp.nextPN, sp.LargestAcked), largestAckSent: -1}
	pl.payload = PathChallengeFrame{Data: data}.Append(nil)
	pl.payload = append(pl.payload, make([]byte, minDatagramSize-len(pl.payload)-c.hdrLen(c.p0(), spaceApp, pl.pnLen, 0)-tagLen)...)
	pkt, _ := c.sealPlan(time.Now(), c.p0(), &pl, nil)
	cidLen, open := len(c.scid), c.spaces[spaceApp].open
	c.mu.Unlock()
	if _, err := probe.WriteTo(pkt, l.Addr()); err != nil {
		t.Fatal(err)
	}

	buf := make([]byte, 2048)
	probe.SetReadDeadline(time.Now().Add(3 * time.Second))
	n, _, err := probe.ReadFrom(buf)
	if err != nil {
		t.Fatalf("no answer at the probe's address (%v): the PATH_RESPONSE went elsewhere", err)
	}
	if n < minDatagramSize {
		t.Errorf("answer of %d bytes, want it padded to %d (§8.2.2)", n, minDatagramSize)
	}
	c.mu.Lock() // the keys' scratch is the connection's
	o, err := open.Unprotect(buf[:n], 1+cidLen, -1, 0)
	c.mu.Unlock()
	if err != nil {
		t.Fatalf("answer: %v", err)
	}
	frames, err := ParseFrames(o.Payload, Packet1RTT, c.Multipath())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range frames {
		if r, ok := f.(PathResponseFrame); ok && r.Data == data {
			found = true
		}
	}
	if !found {
		t.Errorf("answer frames %v: no PATH_RESPONSE with the challenge's data", frames)
	}
	srv.mu.Lock()
	after := srv.p0().remote.String()
	srv.mu.Unlock()
	if after != before {
		t.Errorf("server moved path 0 to %s (was %s) on a probing packet", after, before)
	}
}

// A PATH_RESPONSE sent away from the path's address is sealed into a
// buffer of its own: for every anti-amplification limit (its padding
// follows it) the packet goes out, none panics for want of room for
// the AEAD tag (a limit of ~90 bytes did).
func TestPathResponseAwayAnyLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mp := newMPPair(t, ctx, udpLoopback(t), nil, nil)
	c := mp.c
	probe := udpLoopback(t)
	func() {
		c.mu.Lock()
		defer c.mu.Unlock() // a panic must not leave the cleanup waiting
		p := c.p0()
		for limit := 0; limit <= 1300; limit++ {
			p.responses = append(p.responses, pathResponse{data: [8]byte{byte(limit)}, to: probe.LocalAddr(), limit: limit})
			c.sendResponsesAway(time.Now(), p)
		}
	}()
	probe.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, _, err := probe.ReadFrom(make([]byte, 2048)); err != nil {
		t.Fatalf("no PATH_RESPONSE at the other address: %v", err)
	}
}

// sameAddr and sameHost see an IPv4 peer read by a dual-stack socket
// (::ffff:a.b.c.d) as the IPv4 address it is.
func TestSameAddrIPv4Mapped(t *testing.T) {
	v4 := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1).To4(), Port: 4433}
	mapped := &net.UDPAddr{IP: net.ParseIP("::ffff:127.0.0.1"), Port: 4433}
	if !sameAddr(v4, mapped) || !sameHost(v4, mapped) {
		t.Error("127.0.0.1:4433 and [::ffff:127.0.0.1]:4433 differ")
	}
	if sameAddr(v4, &net.UDPAddr{IP: net.ParseIP("::ffff:127.0.0.1"), Port: 4434}) {
		t.Error("ports 4433 and 4434 are the same")
	}
}
