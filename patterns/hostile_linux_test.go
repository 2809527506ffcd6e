//go:build linux && !race

// The race detector multiplies memory: the RSS bound holds without it.

package patterns

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mptester/mptester/internal/certs"
	"github.com/mptester/mptester/internal/rsstest"
	"github.com/mptester/mptester/mpquic"
	"github.com/mptester/mptester/patterns/wire"
)

// TestHostileNeverReadingClients is the second attack on serve's
// mpquic listener: 40 clients from 40 addresses each open 100 streams
// asking for a 30 s iperf download and read nothing. Every stream beyond
// the first of a connection takes a session slot, so a client gets
// MaxPerClient (4 here) and the other 96 streams are answered with a busy
// error frame naming the limit; the server's unsent data is bounded per
// stream and per connection; the process (server and clients, a fresh
// one) stays under 300 MB resident, and a well-behaved client's download completes
// meanwhile. Once every client left, the server returns the freed memory
// (under 100 MB resident again). Before the fix all 4,000 streams were
// served (1.41 GB RSS in the run, kept for minutes).
func TestHostileNeverReadingClients(t *testing.T) {
	if testing.Short() {
		t.Skip("4,000 streams")
	}
	if !rsstest.InFreshProcess(t) {
		return
	}
	const clients, streams, perClient = 40, 100, 4
	cert, _, err := certs.SelfSigned(nil)
	if err != nil {
		t.Fatal(err)
	}
	lim := DefaultLimits()
	lim.MaxPerClient = perClient
	lim.ReadTimeout = 10 * time.Second
	srv, err := NewServer(ServerConfig{Certificate: cert, Transports: []string{"mpquic"},
		Listen: map[string][]string{"mpquic": {"127.0.0.1:0"}}, Limits: lim, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	target := srv.Addrs("mpquic")[0].(*net.UDPAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	tlsConf := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{ALPNIperf}}
	dial := func(ip net.IP, conf *mpquic.Config) *mpquic.Conn {
		udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: ip})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { udp.Close() })
		c, err := mpquic.Dial(ctx, udp, target, tlsConf, conf)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.CloseWithError(0, "") })
		return c
	}
	hello := wire.Hello{Version: wire.Version, Kind: wire.KindIperfDownload, Duration: 30 * time.Second}.Encode()

	if !rsstest.ResetPeak() {
		t.Fatal("the kernel did not reset VmHWM")
	}
	before := rsstest.MB("VmRSS")
	var hostile []*mpquic.Conn
	var opened [][]*mpquic.Stream
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			// Small receive windows: the clients' own memory stays small,
			// the server's unsent data is what is measured.
			c := dial(net.IPv4(127, 0, 1, byte(10+i)), &mpquic.Config{StreamReceiveWindow: 16 << 10, ConnectionReceiveWindow: 256 << 10})
			var ss []*mpquic.Stream
			for range streams {
				s, err := c.OpenStream(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				_ = wire.WriteFrame(s, wire.TypeHello, hello)
				ss = append(ss, s)
			}
			mu.Lock()
			hostile, opened = append(hostile, c), append(opened, ss)
			mu.Unlock()
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	t.Logf("after the hostile streams: peak %.0f MB", rsstest.MB("VmHWM"))
	time.Sleep(2 * time.Second)
	t.Logf("2 s later: peak %.0f MB", rsstest.MB("VmHWM"))
	// A well-behaved client downloads for 2 s meanwhile.
	good := dial(net.IPv4(127, 0, 0, 1), nil)
	gs, err := good.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	goodHello := wire.Hello{Version: wire.Version, Kind: wire.KindIperfDownload, Duration: 2 * time.Second}.Encode()
	if err := wire.WriteFrame(gs, wire.TypeHello, goodHello); err != nil {
		t.Fatal(err)
	}
	gs.SetReadDeadline(time.Now().Add(30 * time.Second))
	r := wire.NewReader(gs, 0)
	var got uint64
	for {
		f, err := r.ReadFrame()
		if err != nil {
			t.Fatalf("the well-behaved client's download after %d bytes: %v", got, err)
		}
		if f.Type == wire.TypeData {
			got += uint64(len(f.Body))
			continue
		}
		if f.Type != wire.TypeDone {
			t.Fatalf("the well-behaved client got a %s frame after %d bytes", f.Type, got)
		}
		break
	}

	t.Logf("after the good download: peak %.0f MB", rsstest.MB("VmHWM"))
	// What each hostile stream was answered: data, or the refusal.
	var served, refused, failed atomic.Int64
	var firstErr atomic.Value
	for i, ss := range opened {
		for _, s := range ss {
			wg.Go(func() {
				s.SetReadDeadline(time.Now().Add(5 * time.Second))
				f, err := wire.NewReader(s, 1<<20).ReadFrame()
				var ef *wire.ErrorFrame
				if err == nil && f.Type == wire.TypeError {
					ef, err = wire.DecodeError(f.Body)
				}
				switch {
				case err != nil:
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("client %d stream %d: %v", i, s.StreamID(), err))
				case f.Type == wire.TypeData:
					served.Add(1)
				case ef != nil && ef.Code == wire.CodeBusy && strings.Contains(ef.Reason, fmt.Sprintf("limit of %d sessions", perClient)):
					refused.Add(1)
				default:
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("client %d stream %d: %s frame %+v", i, s.StreamID(), f.Type, ef))
				}
			})
		}
	}
	wg.Wait()
	peak := rsstest.MB("VmHWM")
	if n := failed.Load(); n > 0 {
		t.Errorf("%d streams answered neither data nor the refusal, first %v", n, firstErr.Load())
	}
	t.Logf("%d streams served, %d refused; RSS %.0f MB before, peak %.0f MB; the good client got %d bytes",
		served.Load(), refused.Load(), before, peak, got)
	if served.Load() > clients*perClient || refused.Load() < clients*(streams-perClient) {
		t.Errorf("%d streams served, %d refused: want at most %d served (%d per client)", served.Load(), refused.Load(), clients*perClient, perClient)
	}
	if peak > 300 {
		t.Errorf("peak RSS %.0f MB (%.0f MB before), want under 300 MB", peak, before)
	}
	for _, c := range hostile {
		c.CloseWithError(0, "")
	}
	good.CloseWithError(0, "")
	left := rsstest.MB("VmRSS")
	deadline := time.Now().Add(20 * time.Second)
	for srv.lim.inUse() > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if n := srv.lim.inUse(); n > 0 {
		t.Fatalf("%d session slots still taken after the clients left", n)
	}
	// The server gives the freed memory back once the last session ended
	// (the runtime alone kept it for minutes).
	rss := rsstest.MB("VmRSS")
	for end := time.Now().Add(10 * time.Second); rss > 100 && time.Now().Before(end); rss = rsstest.MB("VmRSS") {
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("RSS %.0f MB when the clients left, %.0f MB once the last session ended", left, rss)
	if rss > 100 {
		t.Errorf("RSS %.0f MB after the last session ended, want the freed memory returned (under 100 MB)", rss)
	}
}
