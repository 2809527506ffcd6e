package patterns

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/mptester/mptester/internal/certs"
	"github.com/mptester/mptester/patterns/mobile"
	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/probe"
)

// registerHandoverTCP registers, for one test, TLS over TCP under another
// name as a second handover transport, so mobile mode has two to run side
// by side.
func registerHandoverTCP(t *testing.T) string {
	tcp, err := transport.Get("tcp")
	if err != nil {
		t.Fatal(err)
	}
	const name = "tcphandover"
	t.Cleanup(transport.Register(transport.Descriptor{Name: name, Help: "test", Order: 98, Network: "tcp",
		Handover: true, ServedBy: "tcp", New: tcp.New}))
	return name
}

// TestMobileSideBySide: mptcp and a second handover transport run the
// interactive pattern at once, each with its own connections and
// counters; the run ends at the primary's loss plus the grace time (not
// at its 20 s duration); without a backup path each transport says
// no-backup; the ratio is MPTCP's max delays over the other's.
func TestMobileSideBySide(t *testing.T) {
	lo := loopback(t)
	srv := startServer(t, DefaultLimits())
	other := registerHandoverTCP(t)
	t0 := time.Now()
	var emitted []any
	o := RunOptions{Servers: []string{"127.0.0.1"}, Ports: map[string]uint16{"tcp": srv.port("tcp")},
		Transports: []string{"mptcp", other}, Paths: []probe.Path{lo}, Families: []probe.Family{probe.Family4},
		Params: Params{Interval: 50 * time.Millisecond}, PollEvery: 100 * time.Millisecond,
		Discover: func(context.Context) ([]probe.Path, error) {
			if time.Since(t0) > 1500*time.Millisecond {
				return []probe.Path{}, nil // the primary path is gone
			}
			return []probe.Path{lo}, nil
		},
		TLS:  func(string) (*tls.Config, error) { return certs.ClientTLS("localhost", srv.pin, false) },
		Emit: func(r any) error { emitted = append(emitted, r); return nil }}
	rec, err := RunMobile(context.Background(), o, MobileOptions{Duration: 20 * time.Second, Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(t0); el > 8*time.Second {
		t.Fatalf("run took %v: it should end 1 s after the primary's loss at ~1.5 s", el)
	}
	if rec.Ended != MobileEndPrimaryLost || rec.PrimaryLost == nil || rec.PrimaryLost.Reason != "interface disappeared" || rec.Backup != "" {
		t.Fatalf("ended %q, loss %+v, backup %q", rec.Ended, rec.PrimaryLost, rec.Backup)
	}
	if len(emitted) != 3 || len(rec.Transports) != 2 {
		t.Fatalf("%d records, %d transports", len(emitted), len(rec.Transports))
	}
	ports := map[string]string{}
	for i, mt := range rec.Transports {
		r := emitted[i].(Record)
		if r.Config.Transport != mt.Transport || mt.Status != StatusSuccess {
			t.Fatalf("%s: %s %s", mt.Transport, mt.Status, mt.Error)
		}
		if mt.Handover.Status != mobile.StatusNoBackup {
			t.Errorf("%s: handover %s without a backup path", mt.Transport, mt.Handover.Status)
		}
		// Chunks every 50 ms for ~2.5 s: each transport its own count.
		if mt.Upload.Count < 30 || mt.Upload.Count > 80 || mt.Download.Count < 30 || mt.Upload.Lost != 0 {
			t.Errorf("%s: upload %+v download %+v", mt.Transport, mt.Upload, mt.Download)
		}
		for _, c := range r.Connections {
			if other, dup := ports[c.Local]; dup {
				t.Errorf("connection %v shared by %s and %s", c.Local, other, mt.Transport)
			}
			ports[c.Local] = mt.Transport
		}
	}
	if mt := rec.Transports[0]; mt.Transport != "mptcp" || len(mt.PathStates) != 2 || len(mt.PathStates[0]) < 10 {
		t.Errorf("mptcp path states: %d connections", len(mt.PathStates))
	}
	m, q := rec.Transports[0], rec.Transports[1]
	want := float64(m.Upload.Max) / float64(q.Upload.Max)
	if len(rec.Ratios) != 1 || rec.Ratios[0].Other != other || rec.Ratios[0].Upload != want {
		t.Errorf("ratios %+v, want upload %g", rec.Ratios, want)
	}
}
