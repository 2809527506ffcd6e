package patterns

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mptester/mptester/internal/certs"
	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/patterns/wire"
	"github.com/mptester/mptester/probe"
)

// checkSenderRetransmissions: every sender interval has a count; when total
// is given (download: the server's total) it is the intervals' sum.
func checkSenderRetransmissions(t *testing.T, dir string, ivs []IperfInterval, total *uint64) {
	t.Helper()
	var sum uint64
	for i, iv := range ivs {
		if iv.Retransmissions == nil {
			t.Errorf("%s sender interval %d without retransmissions", dir, i)
			continue
		}
		sum += *iv.Retransmissions
	}
	if dir == "download" {
		if total == nil {
			t.Errorf("download without the server's retransmission total")
		} else if *total != sum {
			t.Errorf("download: server's total %d retransmissions, its intervals sum to %d", *total, sum)
		}
	}
}

// TestIperfDownloadStatsPlanted runs the server's download handler on a
// real loopback TCP connection with a planted retransmission counter (a
// fake sampler: fault injection) and checks the stats frame carries the
// counter's per-interval increments: 5 in [0,1s), 7 in [1s,2s), and none
// in [2s,2.5s) where the counter falls (an MPTCP subflow closing takes its
// count along), which must never wrap around.
func TestIperfDownloadStatsPlanted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	m := &Mux{Streams: map[wire.Kind]StreamHandler{}, Families: map[wire.Kind]string{}, Limits: DefaultLimits()}
	iperfPattern{}.Register(m)
	var start atomic.Int64
	planted := func() transport.State {
		el := time.Since(time.Unix(0, start.Load()))
		var n uint32
		switch {
		case el >= 2200*time.Millisecond:
			n = 10
		case el >= 1500*time.Millisecond:
			n = 12
		case el >= 500*time.Millisecond:
			n = 5
		}
		return transport.State{Key: "tcp_info", Data: &transport.TCPInfo{TotalRetrans: n}}
	}
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		start.Store(time.Now().UnixNano())
		ctx := withConnSampler(context.Background(), planted)
		h := wire.Hello{Version: wire.Version, Kind: wire.KindIperfDownload, Duration: 2500 * time.Millisecond}
		served <- m.Streams[wire.KindIperfDownload](ctx, c.(*net.TCPConn), h, wire.NewReader(c, 0))
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r := wire.NewReader(c, 0)
	var res *wire.Result
	var st *wire.Stats
	for st == nil {
		f, err := r.ReadFrame()
		if err != nil {
			t.Fatalf("read: %v (result %v)", err, res)
		}
		switch f.Type {
		case wire.TypeResult:
			v, err := wire.DecodeResult(f.Body)
			if err != nil {
				t.Fatal(err)
			}
			res = &v
		case wire.TypeStats:
			if res == nil {
				t.Fatal("stats before the result")
			}
			v, err := wire.DecodeStats(f.Body)
			if err != nil {
				t.Fatal(err)
			}
			st = &v
		}
	}
	if err := <-served; err != nil {
		t.Fatalf("handler: %v", err)
	}
	want := []uint64{5, 7, 0}
	t.Logf("intervals %+v, retransmissions %v (total %d)", res.Intervals, st.Intervals, st.Retransmissions)
	if len(res.Intervals) != len(want) || len(st.Intervals) != len(want) {
		t.Fatalf("%d result intervals, %d stats intervals; want %d", len(res.Intervals), len(st.Intervals), len(want))
	}
	for i := range want {
		if st.Intervals[i] != want[i] {
			t.Errorf("interval %d: %d retransmissions, planted %d", i, st.Intervals[i], want[i])
		}
	}
	if st.Retransmissions != 12 {
		t.Errorf("total %d retransmissions, planted 12", st.Retransmissions)
	}
}

// fakeIperfServer speaks the download side of the iperf wire protocol on a
// real TLS listener, ending with what end writes after the result: nothing
// (a server that predates the stats frame) or a stats frame of its own.
func fakeIperfServer(t *testing.T, end func(w io.Writer)) uint16 {
	t.Helper()
	cert, _, err := certs.SelfSigned(nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{ALPNIperf}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if f, err := wire.NewReader(c, 0).ReadFrame(); err != nil || f.Type != wire.TypeHello {
			return
		}
		for range 4 {
			if _, err := c.Write(dataFrame); err != nil {
				return
			}
		}
		res := wire.Result{Bytes: 4 * dataFrameLen, Intervals: []wire.Interval{{Start: 0, End: 100 * time.Millisecond, Bytes: 4 * dataFrameLen}}}
		_ = wire.WriteFrame(c, wire.TypeDone, nil)
		_ = wire.WriteFrame(c, wire.TypeResult, wire.EncodeResult(res))
		end(c)
		_ = c.(*tls.Conn).CloseWrite()
		_, _ = io.Copy(io.Discard, c)
	}()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// TestIperfDownloadServerStatsForms: the client accepts a server that
// predates the stats frame (no retransmission count, not a zero one) and
// refuses stats that do not match the result.
func TestIperfDownloadServerStatsForms(t *testing.T) {
	lo := loopback(t)
	run := func(end func(w io.Writer)) Record {
		port := fakeIperfServer(t, end)
		tlsCfg, _ := certs.ClientTLS("", "", true)
		tr, err := transport.New(tcpName, transport.Single(lo, probe.Family4, tlsCfg))
		if err != nil {
			t.Fatal(err)
		}
		cfg := TestConfig{Pattern: "iperf", Transport: tcpName, Path: "lo", Family: 4,
			Server: netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), port),
			Params: Params{Duration: 200 * time.Millisecond, Direction: DirectionDownload}, Timeout: 10 * time.Second}
		return RunTest(context.Background(), tr, cfg, nil, nil)
	}
	t.Run("old server", func(t *testing.T) {
		rec := run(func(io.Writer) {})
		if rec.Status != StatusSuccess {
			t.Fatalf("status %s: %s", rec.Status, rec.Error)
		}
		d := rec.Result.(*IperfResult).Download
		if d.Bytes != 4*dataFrameLen || len(d.PeerIntervals) != 1 || d.Retransmissions != nil || d.PeerIntervals[0].Retransmissions != nil {
			t.Errorf("download %+v: want the bytes and no retransmission count", d)
		}
	})
	t.Run("new server", func(t *testing.T) {
		rec := run(func(w io.Writer) {
			_ = wire.WriteFrame(w, wire.TypeStats, wire.EncodeStats(wire.Stats{Retransmissions: 9, Intervals: []uint64{9}}))
		})
		if rec.Status != StatusSuccess {
			t.Fatalf("status %s: %s", rec.Status, rec.Error)
		}
		d := rec.Result.(*IperfResult).Download
		if d.Retransmissions == nil || *d.Retransmissions != 9 || d.PeerIntervals[0].Retransmissions == nil || *d.PeerIntervals[0].Retransmissions != 9 {
			t.Errorf("download %+v: want the server's 9 retransmissions", d)
		}
	})
	t.Run("stats not matching the result", func(t *testing.T) {
		rec := run(func(w io.Writer) {
			_ = wire.WriteFrame(w, wire.TypeStats, wire.EncodeStats(wire.Stats{Retransmissions: 9, Intervals: []uint64{4, 5}}))
		})
		if rec.Status != StatusProtocolError || !strings.Contains(rec.Error, "stats for 2 intervals, result has 1") {
			t.Fatalf("status %s (%s), want a protocol error", rec.Status, rec.Error)
		}
		t.Logf("%s: %s", rec.Status, rec.Error)
	})
}

// TestAcceptedSamplerReadsServerSide: the server samples its own side of
// an accepted connection the way the client samples its side: tcp_info for
// TCP, MPTCP_FULL_INFO (subflows) when the client negotiated MPTCP.
func TestAcceptedSamplerReadsServerSide(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("tcp_info and mptcp_info sampling are Linux socket options")
	}
	for _, mptcp := range []bool{false, true} {
		var lc net.ListenConfig
		lc.SetMultipathTCP(mptcp)
		ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var d net.Dialer
		d.SetMultipathTCP(mptcp)
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		sc, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sc.Write(make([]byte, 1<<20)); err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadFull(c, make([]byte, 1<<20))
		st := transport.AcceptedSampler(sc)()
		switch {
		case st.Err != "":
			t.Errorf("mptcp=%v: %s", mptcp, st.Err)
		case !mptcp && !tcpSent(st, 1<<20):
			t.Errorf("tcp: server-side sample %+v, want tcp_info with the 1 MB sent", st)
		case mptcp && !subflowSent(st, 1<<20):
			t.Errorf("mptcp: server-side sample %+v, want a subflow with the 1 MB sent", st)
		}
		if transport.AcceptedSampler(nil) != nil {
			t.Error("a sampler for a non-TCP connection")
		}
		c.Close()
		sc.Close()
		ln.Close()
	}
}

func tcpSent(st transport.State, n uint64) bool {
	ti, ok := st.Data.(*transport.TCPInfo)
	return ok && ti.BytesSent >= n
}

func subflowSent(st transport.State, n uint64) bool {
	m, ok := st.Data.(*transport.MPTCPState)
	return ok && len(m.Subflows) > 0 && m.Subflows[0].TCP.BytesSent >= n
}
