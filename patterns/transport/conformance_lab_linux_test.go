//go:build linux && !race

package transport_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/emu"
	"github.com/mptester/mptester/lab/labtest"
	"github.com/mptester/mptester/patterns"
	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/probe"
)

// Ports of the suite's servers in the lab's Internet namespace: echo
// servers from labEcho on, one per listening transport; a silent socket
// of each network; nothing on labClosed.
const (
	labEcho   = 8451
	labSilent = 8450
	labClosed = 8449
)

// TestConformanceLab runs the suite for every registered transport from
// the lab's client namespace over both emulated paths (wlan0 primary,
// wwan0 available) to servers in its Internet namespace, and holds the
// transports' byte counters to the emulator's count of the bytes the
// paths carried.
func TestConformanceLab(t *testing.T) {
	l := labtest.Start(t, lab.Options{Domains: 0, Seed: 9})
	for _, p := range lab.PathNames {
		l.Set(t, p, "delay=2ms", "jitter=0s", "loss=0", "rate=0")
	}
	listeners := transport.Listeners()
	if !labtest.IsChild() {
		cert, _ := selfSigned(t)
		for i, d := range listeners {
			echoFor(t, d, labSocket(t, l, d.Network, labEcho+i), cert)
		}
		for _, network := range []string{"tcp", "udp"} {
			silentSocket(t, labSocket(t, l, network, labSilent))
		}
	}
	if !l.InClient(t) {
		return
	}
	at := func(port int) netip.AddrPort { return netip.AddrPortFrom(lab.Server4, uint16(port)) }
	e := env{family: 4,
		paths: []transport.PathRole{{Path: l.Path(t, "wlan0"), Role: transport.RolePrimary},
			{Path: l.Path(t, "wwan0"), Role: transport.RoleAvailable}},
		server: func(t *testing.T, d *transport.Descriptor) (netip.AddrPort, string) {
			for i, ld := range listeners {
				if ld.Name == d.Listener() {
					return at(labEcho + i), "" // another process's certificate: not pinned
				}
			}
			t.Fatalf("no listener for %s", d.Name)
			return netip.AddrPort{}, ""
		},
		silent:     func(*testing.T, string) netip.AddrPort { return at(labSilent) },
		closedPort: func(*testing.T, string) netip.AddrPort { return at(labClosed) },
	}
	var last wireCount
	wire := func() wireCount {
		// Wait until the emulator holds no packet (every packet read is
		// delivered or dropped), so in + dropped is exactly out.
		var now wireCount
		for deadline := time.Now().Add(5 * time.Second); ; {
			now = wireCount{}
			held := uint64(0)
			for _, p := range l.Status(t).Paths {
				u, d := p.Stats.Up, p.Stats.Down
				now.Up += u.BytesDelivered
				now.Down += d.BytesDelivered
				now.UpDropped += u.BytesIn - u.BytesDelivered
				now.UpDeviceDrops += u.DropDevice
				for _, s := range []emu.DirStats{u, d} {
					held += s.PacketsIn - s.Delivered - (s.DropLoss + s.DropQueue + s.DropBlock + s.DropDown + s.DropInvalid + s.WriteErrs)
				}
			}
			if held == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the emulator still holds %d packets after 5 s", held)
			}
			time.Sleep(50 * time.Millisecond)
		}
		delta := wireCount{Up: now.Up - last.Up, Down: now.Down - last.Down,
			UpDropped: now.UpDropped - last.UpDropped, UpDeviceDrops: now.UpDeviceDrops - last.UpDeviceDrops}
		last = now
		return delta
	}
	for _, d := range transport.All() {
		t.Run(d.Name, func(t *testing.T) { conform(t, d, e, wire) })
	}
}

// labSocket opens a server socket of network on port in the lab's
// Internet namespace.
func labSocket(t *testing.T, l *labtest.Lab, network string, port int) any {
	t.Helper()
	addr := fmt.Sprintf(":%d", port)
	var (
		s   any
		err error
	)
	if network == "tcp" {
		s, err = l.Lab.ListenTCP(addr, true)
	} else {
		s, err = l.Lab.ListenUDP(addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestHTTPConformanceLab runs the HTTP suite from the lab's client
// namespace to one `serve` server in its Internet namespace over both
// paths, each 10 ms RTT at 20 Mbit/s: 4 MiB take Wi-Fi alone longer than
// mphttp's 1 s tolerance, so mphttp splits the object over both paths.
// Every transport's counters are held to the emulator's bytes, mphttp's
// per path.
func TestHTTPConformanceLab(t *testing.T) {
	l := labtest.Start(t, lab.Options{Domains: 0, Seed: 10})
	for _, p := range lab.PathNames {
		l.Set(t, p, "delay=5ms", "jitter=0s", "loss=0", "rate=20mbit")
	}
	// Ports: the listeners from labHTTP on, a silent socket of each
	// network on labHTTP-1, nothing on labHTTP-2.
	const labHTTP = 8462
	listeners := transport.Listeners()
	if !labtest.IsChild() {
		cert, _ := selfSigned(t)
		socks := map[string][]any{}
		for i, d := range listeners {
			socks[d.Name] = []any{labSocket(t, l, d.Network, labHTTP+i)}
		}
		startHTTPServer(t, patterns.ServerConfig{Certificate: cert, Sockets: socks})
		for _, network := range []string{"tcp", "udp"} {
			silentSocket(t, labSocket(t, l, network, labHTTP-1))
		}
	}
	if !l.InClient(t) {
		return
	}
	at := func(port int) netip.AddrPort { return netip.AddrPortFrom(lab.Server4, uint16(port)) }
	last := map[string]uint64{}
	wire := func() map[string]uint64 {
		out := map[string]uint64{}
		for _, p := range l.Status(t).Paths {
			out[p.Name] = p.Stats.Down.BytesDelivered - last[p.Name]
			last[p.Name] = p.Stats.Down.BytesDelivered
		}
		return out
	}
	roles := []transport.PathRole{{Path: l.Path(t, "wlan0"), Role: transport.RolePrimary},
		{Path: l.Path(t, "wwan0"), Role: transport.RoleAvailable}}
	ref := &httpRef{status: map[string]int{}}
	client := func(d *transport.Descriptor) httpClient {
		port := 0
		for i, ld := range listeners {
			if ld.Name == d.Listener() {
				port = labHTTP + i
			}
		}
		return httpClient{d: d, addr: at(port), paths: roles, fam: probe.Family4, wire: wire,
			silent:     func(*testing.T, string) netip.AddrPort { return at(labHTTP - 1) },
			closedPort: func(*testing.T, string) netip.AddrPort { return at(labHTTP - 2) }}
	}
	ds := httpTransports(t)
	tcp := client(ds[0])
	ref.tcp = &tcp
	for _, d := range ds {
		t.Run(d.Name, func(t *testing.T) {
			if !d.Carries(transport.FamilyHTTP) {
				t.Skipf("%s does not carry HTTP", d.Name)
			}
			conformHTTPAgainst(t, client(d), ref)
		})
	}
}
