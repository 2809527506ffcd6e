//go:build linux && !race

package patterns

import (
	"context"
	"testing"
	"time"

	"github.com/mptester/mptester/internal/certs"
	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/labtest"
	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/probe"
)

// startECNLab is a rated lab (10 Mbit/s paths) whose emulator bleaches
// the ECN field on wlan0 and marks every 20th ECN-capable packet CE on
// wwan0, both ways.
func startECNLab(t *testing.T, seed int64) (*labtest.Lab, bool) {
	l, ok := startRatedLab(t, seed, 10)
	if !ok {
		return l, false
	}
	l.Set(t, "wlan0", "ecn=bleach")
	l.Set(t, "wwan0", "ecn=ce/20")
	t.Cleanup(func() {
		l.Set(t, "wlan0", "ecn=off")
		l.Set(t, "wwan0", "ecn=off")
	})
	return l, true
}

// TestLabMPQUICECN: the emulator bleaches the ECN field on wlan0 and marks
// every 20th ECN-capable packet CE on wwan0, both ways; iperf over mpquic
// on both paths records wlan0 `ecn: bleached` and wwan0 `ecn: validated`,
// and wwan0's CE counts equal what the emulator marked: CE on the server's
// packets (Down) as the client received them, within a few packets (the
// last sample is taken when the test ends, a few packets may pass after);
// CE on the client's packets (Up) as the server reported them, short by
// at most the marks on the packets whose arrival the server had not
// reported yet (every 20th of the record's ect_unreported, +2 per
// connection).
func TestLabMPQUICECN(t *testing.T) {
	l, ok := startECNLab(t, 14)
	if !ok {
		return
	}
	before := l.Status(t)
	_, _, rec := mpquicIperf(t, l, true, 3*time.Second)
	after := l.Status(t)

	type got struct {
		ecn                        string
		ceSent, ceRecv, unreported uint64
		packets, conns             uint64
	}
	paths := map[string]*got{}
	for _, c := range rec.Connections {
		if len(c.Samples) == 0 {
			continue
		}
		st, ok := c.Samples[len(c.Samples)-1].Data.(*transport.MPQUICState)
		if !ok {
			t.Fatalf("mpquic sample of %T", c.Samples[len(c.Samples)-1].Data)
		}
		for _, p := range st.Paths {
			g := paths[p.Path]
			if g == nil {
				g = &got{ecn: p.ECN}
				paths[p.Path] = g
			}
			if g.ecn != p.ECN {
				t.Errorf("%s: connections disagree: ecn %s and %s", p.Path, g.ecn, p.ECN)
			}
			g.ceSent += p.CESent
			g.ceRecv += p.CEReceived
			g.unreported += p.ECTUnreported
			g.packets += p.PacketsSent
			g.conns++
		}
	}
	planted := map[string][2]uint64{} // CE marked up, down
	bleached := map[string]uint64{}
	for i, p := range after.Paths {
		b := before.Paths[i].Stats
		planted[p.Name] = [2]uint64{p.Stats.Up.ECNMarkedCE - b.Up.ECNMarkedCE, p.Stats.Down.ECNMarkedCE - b.Down.ECNMarkedCE}
		bleached[p.Name] = p.Stats.Up.ECNBleached - b.Up.ECNBleached + p.Stats.Down.ECNBleached - b.Down.ECNBleached
	}
	for _, name := range lab.PathNames {
		g := paths[name]
		if g == nil {
			t.Errorf("%s: no mpquic path in the record", name)
			continue
		}
		pl := planted[name]
		t.Logf("%s: recorded ecn %s, CE sent %d received %d, unreported %d (client sent %d packets, %d connections); emulator marked CE up %d down %d, bleached %d",
			name, g.ecn, g.ceSent, g.ceRecv, g.unreported, g.packets, g.conns, pl[0], pl[1], bleached[name])
	}
	if g := paths["wlan0"]; g != nil {
		if g.ecn != "bleached" || g.ceSent != 0 || g.ceRecv != 0 {
			t.Errorf("wlan0 (bleached by the emulator): ecn %s, CE %d/%d; want bleached and no CE", g.ecn, g.ceSent, g.ceRecv)
		}
		if bleached["wlan0"] == 0 {
			t.Error("the emulator bleached nothing on wlan0: mpquic did not mark it")
		}
	}
	if g := paths["wwan0"]; g != nil {
		pl := planted["wwan0"]
		if g.ecn != "validated" {
			t.Errorf("wwan0 (CE-marked by the emulator): ecn %s, want validated", g.ecn)
		}
		if pl[0] < 10 || pl[1] < 10 {
			t.Errorf("the emulator marked only %d up, %d down: too few to compare", pl[0], pl[1])
		}
		const slack = 3
		if miss := g.unreported/20 + 2*g.conns; g.ceSent > pl[0] || g.ceSent+miss < pl[0] {
			t.Errorf("wwan0: CE on the client's packets: recorded %d, the emulator marked %d (tolerance -%d: %d packets unreported)", g.ceSent, pl[0], miss, g.unreported)
		}
		if g.ceRecv > pl[1] || g.ceRecv+slack < pl[1] {
			t.Errorf("wwan0: CE on the server's packets: recorded %d received, the emulator marked %d (tolerance -%d)", g.ceRecv, pl[1], slack)
		}
	}
}

// TestLabQUICECN: the same planted paths as TestLabMPQUICECN, iperf over
// quic (quic-go, one path each) with its ECN recorded: wlan0 `ecn:
// bleached` with no CE, wwan0 `ecn: validated` with CE counts equal to the
// emulator's marks: on the server's packets (CE received, within a few
// packets: the last sample is taken as the test ends) and on the client's
// (CE the server reported in its ACKs: short by at most the marks on the
// client's last packets, whose ACKs may not have arrived: 5 per
// connection).
func TestLabQUICECN(t *testing.T) {
	l, ok := startECNLab(t, 15)
	if !ok {
		return
	}
	tlsCfg, _ := certs.ClientTLS("", "", true)
	for _, name := range lab.PathNames {
		before := l.Status(t)
		o := transport.Single(l.Path(t, name), probe.Family4, tlsCfg)
		o.QUICECN = true
		tr, err := transport.New("quic", o)
		if err != nil {
			t.Fatal(err)
		}
		params := Params{Duration: 2 * time.Second}
		cfg := TestConfig{Pattern: "iperf", Transport: "quic", Path: name, Family: int(probe.Family4),
			Server: labServer(probe.Family4), Params: params, Timeout: DefaultTimeout("iperf", params)}
		rec := RunTest(context.Background(), tr, cfg, []string{"wlan0", "wwan0"}, nil)
		if rec.Status != StatusSuccess {
			t.Fatalf("iperf over quic on %s: %s: %s", name, rec.Status, rec.Error)
		}
		after := l.Status(t)
		var ecn []string
		var ceSent, ceRecv, conns uint64
		for _, c := range rec.Connections {
			if len(c.Samples) == 0 {
				continue
			}
			st, ok := c.Samples[len(c.Samples)-1].Data.(*transport.QUICStats)
			if !ok || st.QUICECN == nil {
				t.Fatalf("%s: quic sample without ECN: %#v", name, c.Samples[len(c.Samples)-1].Data)
			}
			ecn = append(ecn, st.ECN)
			ceSent += st.CESent
			ceRecv += st.CEReceived
			conns++
		}
		var up, down, bleached uint64
		for i, p := range after.Paths {
			if p.Name == name {
				b := before.Paths[i].Stats
				up, down = p.Stats.Up.ECNMarkedCE-b.Up.ECNMarkedCE, p.Stats.Down.ECNMarkedCE-b.Down.ECNMarkedCE
				bleached = p.Stats.Up.ECNBleached - b.Up.ECNBleached + p.Stats.Down.ECNBleached - b.Down.ECNBleached
			}
		}
		t.Logf("%s: recorded ecn %v, CE sent %d received %d (%d connections); emulator marked CE up %d down %d, bleached %d",
			name, ecn, ceSent, ceRecv, conns, up, down, bleached)
		if conns == 0 {
			t.Fatalf("%s: no quic connection sampled", name)
		}
		want := map[string]string{"wlan0": "bleached", "wwan0": "validated"}[name]
		for _, e := range ecn {
			if e != want {
				t.Errorf("%s: ecn %s, want %s", name, e, want)
			}
		}
		switch name {
		case "wlan0":
			if ceSent != 0 || ceRecv != 0 || bleached == 0 {
				t.Errorf("wlan0 (bleached): CE %d/%d, the emulator bleached %d packets; want no CE and some bleached", ceSent, ceRecv, bleached)
			}
		case "wwan0":
			if up < 10 || down < 10 {
				t.Errorf("the emulator marked only %d up, %d down: too few to compare", up, down)
			}
			if ceSent > up || ceSent+5*conns < up {
				t.Errorf("wwan0: CE on the client's packets: recorded %d, the emulator marked %d (tolerance -%d)", ceSent, up, 5*conns)
			}
			if ceRecv > down || ceRecv+3 < down {
				t.Errorf("wwan0: CE on the server's packets: recorded %d received, the emulator marked %d (tolerance -3)", ceRecv, down)
			}
		}
	}
}
