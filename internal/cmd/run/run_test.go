package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/mptester/mptester/internal/certs"
	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/patterns"
	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/probe/nw"
	"github.com/mptester/mptester/report"
)

func startServer(t *testing.T, noMPTCP bool) (tcpPort, quicPort int, pin string) {
	tcpPort, quicPort, _, pin = startServerMPQUIC(t, noMPTCP)
	return tcpPort, quicPort, pin
}

// startServerMPQUIC also returns the mpquic listener's port.
func startServerMPQUIC(t *testing.T, noMPTCP bool) (tcpPort, quicPort, mpquicPort int, pin string) {
	return startServerQlog(t, noMPTCP, "")
}

// startServerQlog is startServerMPQUIC writing qlog traces to qlogDir.
func startServerQlog(t *testing.T, noMPTCP bool, qlogDir string) (tcpPort, quicPort, mpquicPort int, pin string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("loopback path binding is tested on Linux")
	}
	cert, pin, err := certs.SelfSigned(nil)
	if err != nil {
		t.Fatal(err)
	}
	served := transport.Names()
	if noMPTCP {
		served = slices.DeleteFunc(served, func(n string) bool { return n == "mptcp" })
	}
	listen := map[string][]string{}
	for _, d := range transport.Listeners() {
		listen[d.Name] = []string{"127.0.0.1:0"}
	}
	srv, err := patterns.NewServer(patterns.ServerConfig{Certificate: cert, Listen: listen, Transports: served, QlogDir: qlogDir})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv.Addrs("tcp")[0].(*net.TCPAddr).Port, srv.Addrs("quic")[0].(*net.UDPAddr).Port, srv.Addrs("mpquic")[0].(*net.UDPAddr).Port, pin
}

func execute(t *testing.T, discover func(context.Context) ([]probe.Path, error), args ...string) (string, string, error) {
	t.Helper()
	io, out, errOut := cmdutil.Test()
	f := &cmdutil.Factory{IO: io, Logger: slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	cmd := NewCmdRun(f, func(ctx context.Context, o *Options) error {
		if discover != nil {
			o.Discover = discover
			o.PollEvery = 200 * time.Millisecond // the fake change comes with no netlink event
		}
		return runRun(ctx, o)
	})
	cmd.SetArgs(args)
	cmd.SetContext(context.Background())
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

func TestSmokePasses(t *testing.T) {
	tp, qp, mp, pin := startServerMPQUIC(t, false)
	out, errOut, err := execute(t, nil, "--smoke", "--server", "127.0.0.1", "--tcp-port", fmt.Sprint(tp), "--quic-port", fmt.Sprint(qp),
		"--quic-alt-port", fmt.Sprint(qp), "--mpquic-port", fmt.Sprint(mp), "--pin", pin, "--paths", "lo", "--interval", "50ms", "--ping-count", "3", "--duration", "300ms")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if err := report.ValidateDocument([]byte(out)); err != nil {
		t.Fatalf("run document does not validate against the envelope schema: %v", err)
	}
	var doc report.Document
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	// Every pattern over every transport that carries it (MPHTTP: the
	// HTTP ones), and ping over the alternative port of each transport
	// whose listener has one (quic, quic-handover).
	want := 0
	for _, d := range transport.All() {
		if l, _ := transport.Get(d.Listener()); l.AltPort != 0 {
			want++
		}
		for _, n := range patterns.Names() {
			if p, _ := patterns.Get(n); d.Carries(p.Family()) {
				want++
			}
		}
	}
	if doc.Status != report.StatusOK || len(doc.Records) != want || doc.Command != "run" {
		t.Fatalf("status %s, %d records", doc.Status, len(doc.Records))
	}
	var cfg Config
	if err := json.Unmarshal(doc.Config, &cfg); err != nil || cfg.Seed == 0 || !cfg.Smoke {
		t.Fatalf("config %s: %v", doc.Config, err)
	}
}

// TestSmokeFailsWithReasons: a server without MPTCP and a closed QUIC port
// each give a one-line reason and exit code 7.
func TestSmokeFailsWithReasons(t *testing.T) {
	tp, _, mp, pin := startServerMPQUIC(t, true)
	_, errOut, err := execute(t, nil, "--smoke", "--server", "127.0.0.1", "--tcp-port", fmt.Sprint(tp), "--quic-port", fmt.Sprint(tp),
		"--quic-alt-port", "0", "--mpquic-port", fmt.Sprint(mp), "--pin", pin, "--paths", "lo", "--patterns", "ping", "--timeout", "3s")
	if !errors.Is(err, cmdutil.ErrCheckFailed) || cmdutil.ExitCode(err) != cmdutil.ExitCheckFailed {
		t.Fatalf("err %v, want check failed", err)
	}
	var fails []string
	for _, l := range strings.Split(errOut, "\n") {
		if strings.HasPrefix(l, "FAIL ") {
			fails = append(fails, l)
		}
	}
	// MPTCP, and every transport the closed QUIC port serves.
	want := []string{"ping/mptcp over lo (IPv4): MPTCP not negotiated"}
	for _, d := range transport.All() {
		if d.Listener() == "quic" {
			want = append(want, "ping/"+d.Name+" over lo (IPv4): ")
		}
	}
	for _, w := range want {
		if !strings.Contains(errOut, w) {
			t.Errorf("no failure line %q", w)
		}
	}
	if len(fails) != len(want) {
		t.Fatalf("failure lines (want %d):\n%s", len(want), errOut)
	}
}

func TestNetworkChangeExitsInvalid(t *testing.T) {
	tp, qp, pin := startServer(t, false)
	var calls atomic.Int32
	discover := func(ctx context.Context) ([]probe.Path, error) {
		ps, err := probe.Discover(ctx, probe.DiscoverOptions{})
		if calls.Add(1) > 3 {
			for i := range ps {
				if ps[i].Name == "lo" {
					ps[i].Up = false
				}
			}
		}
		return ps, err
	}
	out, _, err := execute(t, discover, "--server", "127.0.0.1", "--tcp-port", fmt.Sprint(tp), "--quic-port", fmt.Sprint(qp),
		"--pin", pin, "--paths", "lo", "--patterns", "interactive", "--transports", "quic", "--duration", "5s")
	if !errors.Is(err, cmdutil.ErrInvalid) || cmdutil.ExitCode(err) != cmdutil.ExitInvalid {
		t.Fatalf("err %v, want invalid", err)
	}
	var doc report.Document
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Status != report.StatusInvalid || !strings.Contains(doc.Reason, "network changed during test: lo: ") {
		t.Fatalf("status %s reason %q", doc.Status, doc.Reason)
	}
	_ = time.Second
}

func TestUsageErrors(t *testing.T) {
	lo := func(context.Context) ([]probe.Path, error) {
		return []probe.Path{{Name: "lo", Up: true, Kind: probe.KindLoopback}}, nil
	}
	for _, args := range [][]string{
		{},
		{"--server", "x", "--patterns", "nope", "--paths", "lo"},
		{"--server", "x", "--transports", "sctp", "--paths", "lo"},
		{"--server", "x", "--pin", "zz", "--paths", "lo"},
		{"--server", "x", "--family", "5", "--paths", "lo"},
		{"--server", "x", "--paths", "nosuch0"},
		{"--server", "x", "--tcp-port", "99999", "--paths", "lo"},
		{"--smoke", "--server", "a,b", "--paths", "lo"},
		{"--server", "x", "--paths", "lo", "--iperf-direction", "sideways"},
		{"--server", "x", "--paths", "lo", "--qlog", "/dev/null"},
		{"--server", "x", "--paths", "lo", "--qlog", "/nonexistent-dir/qlog"},
		{"--server", "x", "--paths", "lo", "--mptcp-service", "fastest"},
	} {
		if _, _, err := execute(t, lo, args...); !errors.Is(err, cmdutil.ErrUsage) {
			t.Errorf("%v: err %v, want usage error", args, err)
		}
	}
}

// TestServerNameResolvedWithPathDNS: --server NAME is resolved by the DNS
// server --dns gives the path (a real miekg/dns server on loopback that
// alone knows the name), and the test record says so.
func TestServerNameResolvedWithPathDNS(t *testing.T) {
	tp, qp, pin := startServer(t, false)
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int32
	dnsSrv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		asked.Add(1)
		m := new(dns.Msg)
		m.SetReply(req)
		if q := req.Question[0]; q.Name == "run.mpt.test." && q.Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(127, 0, 0, 1)})
		} else if q.Name != "run.mpt.test." {
			m.Rcode = dns.RcodeNameError
		}
		w.WriteMsg(m)
	})}
	started := make(chan struct{})
	dnsSrv.NotifyStartedFunc = func() { close(started) }
	go dnsSrv.ActivateAndServe()
	<-started
	t.Cleanup(func() { dnsSrv.Shutdown() })
	dnsAddr := pc.LocalAddr().String()

	out, errOut, err := execute(t, nil, "--server", "run.mpt.test", "--dns", "lo="+dnsAddr, "--tcp-port", fmt.Sprint(tp), "--quic-port", fmt.Sprint(qp),
		"--pin", pin, "--paths", "lo", "--patterns", "ping", "--transports", "tcp", "--ping-count", "2", "--pace", "0")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	var doc report.Document
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Status != report.StatusOK || len(doc.Records) != 1 || asked.Load() == 0 {
		t.Fatalf("status %s, %d records, DNS asked %d times", doc.Status, len(doc.Records), asked.Load())
	}
	var rec patterns.Record
	if err := json.Unmarshal(doc.Records[0], &rec); err != nil {
		t.Fatal(err)
	}
	want := patterns.ServerResolution{Host: "run.mpt.test", Path: "lo", DNSServer: dnsAddr}
	if rec.Config.Server.Addr().String() != "127.0.0.1" || rec.Config.ServerResolution == nil || *rec.Config.ServerResolution != want {
		t.Fatalf("server %v resolution %+v, want %+v", rec.Config.Server, rec.Config.ServerResolution, want)
	}
	var cfg Config
	if err := json.Unmarshal(doc.Config, &cfg); err != nil || len(cfg.DNS) != 1 {
		t.Fatalf("config %s: %v", doc.Config, err)
	}

	// A name the path's DNS does not know: a clear error naming both.
	_, _, err = execute(t, nil, "--server", "nosuch.mpt.test", "--dns", "lo="+dnsAddr, "--tcp-port", fmt.Sprint(tp),
		"--pin", pin, "--paths", "lo", "--patterns", "ping", "--transports", "tcp", "--pace", "0")
	if err == nil || !strings.Contains(err.Error(), `server "nosuch.mpt.test"`) || !strings.Contains(err.Error(), "path lo") ||
		!strings.Contains(err.Error(), "NXDOMAIN") {
		t.Fatalf("unknown name: %v", err)
	}
}

// TestMobileModeNoBackup: `run --mode mobile` over loopback, whose only
// path has no backup, ends at --duration (no hang) with a valid document:
// the interactive test of each handover transport, then a mobile_summary
// whose handover status is no-backup and whose capture (as root) saw the
// test packets on lo.
func TestMobileModeNoBackup(t *testing.T) {
	tp, qp, mp, pin := startServerMPQUIC(t, false)
	args := []string{"--mode", "mobile", "--server", "127.0.0.1", "--tcp-port", fmt.Sprint(tp), "--quic-port", fmt.Sprint(qp), "--mpquic-port", fmt.Sprint(mp),
		"--pin", pin, "--paths", "lo", "--interval", "50ms", "--duration", "1s", "--grace", "1s"}
	if os.Getuid() != 0 {
		args = append(args, "--capture=false")
	}
	t0 := time.Now()
	out, errOut, err := execute(t, nil, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if el := time.Since(t0); el > 15*time.Second {
		t.Fatalf("took %v for a 1 s run", el)
	}
	if err := report.ValidateDocument([]byte(out)); err != nil {
		t.Fatalf("run document does not validate against the envelope schema: %v", err)
	}
	var doc struct {
		Status  report.Status     `json:"status"`
		Config  Config            `json:"config"`
		Records []json.RawMessage `json:"records"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	n := len(patterns.HandoverTransports())
	if doc.Status != report.StatusOK || len(doc.Records) != n+1 || doc.Config.Mode != "mobile" || doc.Config.Mobile == nil {
		t.Fatalf("status %s, %d records, config %+v", doc.Status, len(doc.Records), doc.Config)
	}
	var sum patterns.MobileRecord
	if err := json.Unmarshal(doc.Records[n], &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Type != patterns.MobileRecordType || sum.Ended != patterns.MobileEndDuration || len(sum.Transports) != n {
		t.Fatalf("summary %+v", sum)
	}
	for _, mt := range sum.Transports {
		if mt.Status != patterns.StatusSuccess || mt.Handover.Status != "no-backup" || mt.Upload.Count < 10 {
			t.Errorf("%s: %s, handover %s, upload %+v", mt.Transport, mt.Status, mt.Handover.Status, mt.Upload)
		}
		if os.Getuid() == 0 && (len(mt.CapturedBytes) != 1 || mt.CapturedBytes[0].Sent < 20_000) {
			t.Errorf("%s: captured %+v", mt.Transport, mt.CapturedBytes)
		}
	}
}

// TestMPTCPServiceFlag: --mptcp-service is checked everywhere; off macOS
// giving it at all is a usage error naming it (the kernel has no service
// modes), on macOS a valid one is taken.
func TestMPTCPServiceFlag(t *testing.T) {
	run := func(args ...string) (*Options, error) {
		var got *Options
		io, _, _ := cmdutil.Test()
		cmd := NewCmdRun(&cmdutil.Factory{IO: io}, func(_ context.Context, o *Options) error { got = o; return check(o) })
		cmd.SetArgs(append([]string{"--server", "x", "--paths", "lo"}, args...))
		cmd.SetContext(context.Background())
		return got, cmd.Execute()
	}
	defer func(v bool) { mptcpServiceApplies = v }(mptcpServiceApplies)

	mptcpServiceApplies = false
	_, err := run("--mptcp-service", "aggregate")
	if !errors.Is(err, cmdutil.ErrUsage) || !strings.Contains(err.Error(), "--mptcp-service") || !strings.Contains(err.Error(), "macOS only") {
		t.Errorf("Linux, --mptcp-service given: err %v, want a usage error naming it", err)
	}
	o, err := run()
	if err != nil {
		t.Fatalf("Linux, flag not given: %v", err)
	}
	if s := mptcpService(o); s != 0 {
		t.Errorf("Linux: service %v, want none", s)
	}

	mptcpServiceApplies = true
	o, err = run("--mptcp-service", "aggregate")
	if err != nil {
		t.Fatalf("macOS: %v", err)
	}
	if s := mptcpService(o); s != nw.ServiceAggregate {
		t.Errorf("macOS: service %v, want aggregate", s)
	}
	o, err = run()
	if err != nil {
		t.Fatal(err)
	}
	if s := mptcpService(o); s != nw.ServiceInteractive {
		t.Errorf("macOS default: service %v, want interactive", s)
	}
	if _, err := run("--mptcp-service", "fastest"); !errors.Is(err, cmdutil.ErrUsage) {
		t.Errorf("macOS, bad service: err %v", err)
	}
}
