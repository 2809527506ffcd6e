package interop

import (
	"context"
	"crypto/tls"
	"net"
	"testing"

	"github.com/mptester/mptester/mpquic"
)

// long is one long-header packet of a datagram: its type and version.
type long struct {
	typ     mpquic.PacketType
	version uint32
}

// longPackets are a datagram's long-header packets, coalesced ones too
// (their headers are not protected beyond the first byte's low bits).
func longPackets(b []byte) []long {
	var out []long
	for len(b) > 0 && b[0]&0x80 != 0 {
		h, n, err := mpquic.ParseHeader(b, 0)
		if err != nil || n <= 0 {
			break
		}
		out = append(out, long{h.Type, h.Version})
		b = b[n:]
	}
	return out
}

// versionsOf are the versions of the packets of type typ that went in
// direction d.
func versionsOf(r *run, d dir, typ mpquic.PacketType) map[uint32]bool {
	vs := map[uint32]bool{}
	for _, s := range r.relay.seenLog() {
		if s.dir != d {
			continue
		}
		for _, p := range s.longs {
			if p.typ == typ {
				vs[p.version] = true
			}
		}
	}
	return vs
}

// checkCVN is the runner's v2 check: the client's Initials include v1, the
// server's include v2 (it may send v1 ones before its CRYPTO), and every
// Handshake packet both ways is v2; both mpquic's side and the peer's
// own record say v2. A peer that sent no version_information cannot be
// moved (or move us): the case is unsupported by it, said after the
// transfer (which shows that offering v2 did not hurt).
func checkCVN(t *testing.T, r *run) {
	t.Helper()
	for _, c := range r.conns {
		if c.PeerVersionInfo() == nil {
			why := ""
			if r.peer.name() == "ngtcp2" {
				// Its own words: gtlsclient --help names the list
				// other_versions (the drafts' name) and offers v1 and
				// v2draft only.
				why = "; ngtcp2 0.12 negotiates as the drafts did, between v1 and its v2 draft"
			}
			t.Skipf("unsupported: %s's %s sent no version_information transport parameter (0x11, RFC 9368), so there is no compatible version negotiation; the connection stayed in 0x%08x%s",
				r.peer.name(), map[role]string{mpquicClient: "server", mpquicServer: "client"}[r.role], c.Version(), why)
		}
	}
	checkConnections(t, r, 1)
	v1, v2 := mpquic.Version1, mpquic.Version2
	if vs := versionsOf(r, toServer, mpquic.PacketInitial); !vs[v1] {
		t.Errorf("client Initials in %v, want v1 among them", vs)
	}
	if vs := versionsOf(r, toClient, mpquic.PacketInitial); !vs[v2] {
		t.Errorf("server Initials in %v, want v2 among them", vs)
	}
	for _, d := range []dir{toServer, toClient} {
		if vs := versionsOf(r, d, mpquic.PacketHandshake); len(vs) != 1 || !vs[v2] {
			t.Errorf("Handshake packets (%v) in %v, want v2 only", d, vs)
		}
	}
	for _, c := range r.conns {
		if c.Version() != v2 {
			t.Errorf("mpquic's connection in 0x%08x", c.Version())
		}
	}
	if r.peerEv != nil {
		r.peerEv.mu.Lock()
		v := r.peerEv.version
		r.peerEv.mu.Unlock()
		if v != 0 && v != v2 {
			t.Errorf("the peer says version 0x%x", v)
		}
	}
}

// self is mpquic as its own peer, for the one case no installable peer
// can run: the runner's v2 (quic-go v0.65 and ngtcp2 0.12 send no
// version_information; ngtcp2's negotiation knows only its v2 draft).
type self struct{}

func (self) name() string                              { return "mpquic" }
func (self) version() string                           { return "(this tree)" }
func (self) alpn() string                              { return hqALPN }
func (self) amplificationSlack() (int, string)         { return 0, "" }
func (self) keyUpdated(*evidence, bool) (bool, string) { return false, "" }

func (self) unsupported(c string, r role) string {
	if c != "v2" {
		return "mpquic against itself runs only the v2 case (the other peers cannot)"
	}
	return ""
}

func (self) serve(t *testing.T, ctx context.Context, o *opts, tc *tls.Config) (net.Addr, *evidence) {
	ln, accepted := mpquicServe(t, ctx, o, tc)
	ev := &evidence{}
	ev.onCheck = func() {
		for _, c := range accepted() {
			ev.mu.Lock()
			ev.version = c.Version()
			ev.mu.Unlock()
		}
	}
	return ln.Addr(), ev
}

func (self) fetch(t *testing.T, ctx context.Context, o *opts, addr net.Addr, tc *tls.Config) (map[string][]byte, *evidence, error) {
	got, conns, err := mpquicFetch(ctx, o, addr.(*net.UDPAddr), tc, t.Logf)
	ev := &evidence{}
	for _, c := range conns {
		ev.version = c.Version()
	}
	return got, ev, err
}

// TestInteropMpquic: the runner's v2 case between mpquic's client and
// server, both roles (the same two here), through the relay.
func TestInteropMpquic(t *testing.T) {
	t.Logf("peer %s %s", self{}.name(), self{}.version())
	for _, c := range cases {
		if c.name != "v2" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			for _, ro := range []role{mpquicClient, mpquicServer} {
				t.Run(string(ro), func(t *testing.T) { runCase(t, self{}, c, ro) })
			}
		})
	}
}
