package lab

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mptester/mptester/internal/linkstats"

	"github.com/mptester/mptester/lab/emu"
)

// Lab is a running lab owned by this process.
type Lab struct {
	opts    Options
	info    Info
	log     *slog.Logger
	started time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	links   map[string]*emu.Link
	mu      sync.Mutex
	closers []io.Closer
	closed  bool
	world   worldState
	truth   *TimelineTruth // guarded by mu

	impMu    sync.Mutex // serialises Impair
	impair   map[string]Impair
	impTruth []ImpairmentTruth // guarded by mu
	// portal: the path's DNS answers the captive portal (world.Portal).
	portal map[string]*atomic.Bool
}

// Up builds a lab: namespaces, emulated paths, routing, MPTCP, the
// synthetic Internet's DNS views and servers. It first removes whatever a
// previous lab of the same name left. Close tears everything down.
func Up(ctx context.Context, opts Options) (_ *Lab, err error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: the lab needs root to create network namespaces", ErrPermission)
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return nil, fmt.Errorf("%w: the lab needs /dev/net/tun: %v", ErrUnsupported, err)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("%w: the lab needs iproute2 (ip): %v", ErrUnsupported, err)
	}
	// A lab that answers is not stale: never tear it down from here.
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	_, cerr := Control(cctx, FilesIn(opts.Dir).Control, Request{Op: "status"})
	cancel()
	if cerr == nil {
		return nil, fmt.Errorf("lab %s is already running (dir %s); run 'mptester lab down --name %s' first", opts.Name, opts.Dir, opts.Name)
	}
	if err := CleanStale(ctx, opts.Name, opts.Dir); err != nil {
		return nil, fmt.Errorf("clean stale lab %s: %w", opts.Name, err)
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.Background())
	l := &Lab{opts: opts, log: opts.Logger, started: time.Now(), ctx: lctx, cancel: cancel,
		links: map[string]*emu.Link{}, impair: map[string]Impair{}, portal: map[string]*atomic.Bool{}}
	for _, n := range PathNames {
		l.portal[n] = new(atomic.Bool)
	}
	l.info = l.buildInfo()
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	t0 := time.Now()
	if err := l.topology(ctx); err != nil {
		return nil, err
	}
	l.log.Debug("lab topology up", "elapsed", time.Since(t0))
	if err := l.startWorld(ctx); err != nil {
		return nil, err
	}
	if err := l.startServers(); err != nil {
		return nil, err
	}
	if err := l.startPortal(); err != nil {
		return nil, err
	}
	for _, name := range PathNames {
		if opts.nat64Paths()[name] {
			if err := l.startNAT64(ctx, name); err != nil {
				return nil, fmt.Errorf("path %s: nat64: %w", name, err)
			}
		}
	}
	for name, c := range opts.Params {
		l.links[name].Apply(c)
	}
	for name, c := range opts.Impair {
		if err := l.Impair(name, c); err != nil {
			return nil, fmt.Errorf("path %s: %w", name, err)
		}
	}
	if len(opts.Timeline) > 0 {
		l.StartTimeline(opts.Scenario, opts.Timeline, opts.KernelLink)
	}
	if err := l.writeFiles(); err != nil {
		return nil, err
	}
	l.log.Info("lab up", "name", opts.Name, "client_ns", l.info.Namespaces.Client,
		"internet_ns", l.info.Namespaces.Internet, "elapsed", time.Since(t0))
	return l, nil
}

func (l *Lab) buildInfo() Info {
	i := Info{Name: l.opts.Name, Dir: l.opts.Dir, PID: os.Getpid(), StartedAt: l.started.UTC(),
		Namespaces: Namespaces{Client: ClientNS(l.opts.Name), Internet: InternetNS(l.opts.Name)},
		Resolvers:  map[string][]string{}, Servers: []netip.Addr{Server4, Server6},
		PublicPrefixes: PublicPrefixes, PrivatePrefixes: PrivatePrefixes,
		Ports:      map[string]int{"https": PortHTTPS, "http": PortHTTP, "sink": PortSink, "source": PortSrc},
		CellBackup: l.opts.CellBackup, WorldSeed: l.opts.WorldSeed, Domains: l.opts.Domains,
		Files: FilesIn(l.opts.Dir)}
	for _, n := range PathNames {
		p := l.opts.plan(n)
		i.Paths = append(i.Paths, p)
		i.Resolvers[n] = []string{p.Resolv4.String(), p.Resolv6.String()}
		if l.opts.nat64Paths()[n] {
			i.Resolvers[n] = []string{p.Resolv6.String()} // the DNS64
		}
	}
	return i
}

// Info returns lab.json's content.
func (l *Lab) Info() Info { return l.info }

// SetTestServer records the test server in lab.json. Call it before the
// control socket serves (Status reads the info unlocked).
func (l *Lab) SetTestServer(ts *TestServer) error {
	l.info.TestServer = ts
	return writeJSONFile(l.info.Files.LabJSON, l.info)
}

// Link returns the emulator of path name (nil if none).
func (l *Lab) Link(name string) *emu.Link { return l.links[name] }

func (l *Lab) addCloser(c io.Closer) {
	l.mu.Lock()
	l.closers = append(l.closers, c)
	l.mu.Unlock()
}

// topology creates namespaces, TUN pairs, addresses, routes and MPTCP.
func (l *Lab) topology(ctx context.Context) error {
	cns, ins := l.info.Namespaces.Client, l.info.Namespaces.Internet
	for _, ns := range []string{cns, ins} {
		if err := run(ctx, "ip", "netns", "add", ns); err != nil {
			return err
		}
	}
	// TUNs are created in the host namespace, then moved and renamed; the
	// fds stay valid across the move.
	for i, name := range PathNames {
		p, _ := Plan(name)
		tc, ti := tmpTUN(l.opts.Name, i, 'c'), tmpTUN(l.opts.Name, i, 'i')
		cf, err := emu.OpenTUN(tc)
		if err != nil {
			return fmt.Errorf("path %s: %w", name, err)
		}
		inf, err := emu.OpenTUN(ti)
		if err != nil {
			cf.Close()
			return fmt.Errorf("path %s: %w", name, err)
		}
		link := emu.NewLink(name, cf, inf, l.opts.Seed+int64(i)*7919)
		l.links[name] = link
		if err := ipBatch(ctx, "", []string{
			"link set " + tc + " netns " + cns,
			"link set " + ti + " netns " + ins,
		}); err != nil {
			return err
		}
		if err := ipBatch(ctx, cns, []string{"link set " + tc + " name " + p.Name}); err != nil {
			return err
		}
		if err := ipBatch(ctx, ins, []string{"link set " + ti + " name " + p.Router}); err != nil {
			return err
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			if err := link.Run(l.ctx); err != nil && l.ctx.Err() == nil {
				l.log.Error("emulator stopped", "path", name, "err", err)
			}
		}()
	}
	for _, ns := range []string{cns, ins} {
		if err := sysctls(ctx, ns); err != nil {
			return err
		}
	}
	var cl, il []string
	cl = append(cl, "link set lo up")
	il = append(il, "link set lo up")
	v6only, cgnat := l.opts.nat64Paths(), l.opts.cgnatPaths()
	for _, name := range PathNames {
		p := l.opts.plan(name)
		tbl := fmt.Sprint(p.Table)
		cl = append(cl, "link set "+p.Name+" up")
		if !v6only[name] {
			cl = append(cl,
				fmt.Sprintf("addr add %s/24 dev %s", p.Client4, p.Name),
				fmt.Sprintf("route add default via %s dev %s metric %d", p.Gateway4, p.Name, p.Metric),
				fmt.Sprintf("route add %s dev %s table %s", p.Subnet4, p.Name, tbl),
				fmt.Sprintf("route add default via %s dev %s table %s", p.Gateway4, p.Name, tbl))
		}
		cl = append(cl,
			fmt.Sprintf("addr add %s/64 dev %s nodad", p.Client6, p.Name),
			fmt.Sprintf("route add default via %s dev %s metric %d", p.Gateway6, p.Name, p.Metric),
			fmt.Sprintf("route add %s dev %s table %s", p.Subnet6, p.Name, tbl),
			fmt.Sprintf("route add default via %s dev %s table %s", p.Gateway6, p.Name, tbl),
			// When the link goes down its routes go: a packet from the
			// path's address must then fail, not fall through to the main
			// table and leave by the other path (a phone's Wi-Fi address
			// does not use cellular).
			fmt.Sprintf("route add unreachable default metric 4000 table %s", tbl),
			fmt.Sprintf("-6 route add unreachable default metric 4000 table %s", tbl),
			fmt.Sprintf("rule add from %s lookup %s pref %d", p.Client4, tbl, 1000+p.Table),
			fmt.Sprintf("-6 rule add from %s lookup %s pref %d", p.Client6, tbl, 1000+p.Table),
		)
		if cgnat[name] {
			// The NAT's public side keeps the usual plan's subnet (its
			// public address is routed back over the path as before); the
			// core server is on the Internet namespace's lo, fenced by
			// cgnatRuleset. Behind a NAT64 the plan is the usual one.
			if !v6only[name] {
				pub, _ := Plan(name)
				il = append(il, fmt.Sprintf("addr add %s/24 dev %s", pub.Gateway4, p.Router))
			}
			il = append(il, fmt.Sprintf("addr add %s/32 dev lo", CGNATOf(name).Core))
		}
		il = append(il,
			"link set "+p.Router+" up",
			fmt.Sprintf("addr add %s/24 dev %s", p.Gateway4, p.Router),
			fmt.Sprintf("addr add %s/64 dev %s nodad", p.Gateway6, p.Router),
			fmt.Sprintf("addr add %s/32 dev lo", p.Resolv4),
			fmt.Sprintf("addr add %s/128 dev lo nodad", p.Resolv6),
		)
	}
	il = append(il,
		fmt.Sprintf("addr add %s/32 dev lo", Server4),
		fmt.Sprintf("addr add %s/128 dev lo nodad", Server6),
		fmt.Sprintf("addr add %s/32 dev lo", PortalAddr4),
		fmt.Sprintf("addr add %s/128 dev lo nodad", PortalAddr6))
	for _, pfx := range append(append([]netip.Prefix{}, PublicPrefixes...), PrivatePrefixes...) {
		il = append(il, fmt.Sprintf("route add local %s dev lo", pfx))
	}
	// MPTCP: both ends accept two extra subflows; the client announces its
	// wwan0 addresses as subflow endpoints bound to wwan0. Skipped, with a
	// warning, on kernels without MPTCP.
	if _, err := os.Stat("/proc/sys/net/mptcp/enabled"); err != nil {
		l.log.Warn("kernel without MPTCP: the lab has no MPTCP endpoints", "err", err)
	} else {
		flags := "subflow"
		if l.opts.CellBackup {
			flags = "subflow backup"
		}
		w := l.opts.plan("wwan0")
		cl = append(cl, "mptcp limits set subflows 2 add_addr_accepted 2")
		if !v6only["wwan0"] {
			cl = append(cl, fmt.Sprintf("mptcp endpoint add %s dev wwan0 %s", w.Client4, flags))
		}
		cl = append(cl, fmt.Sprintf("mptcp endpoint add %s dev wwan0 %s", w.Client6, flags))
		il = append(il, "mptcp limits set subflows 2 add_addr_accepted 2")
	}
	if err := ipBatch(ctx, cns, cl); err != nil {
		return err
	}
	if err := ipBatch(ctx, ins, il); err != nil {
		return err
	}
	for _, name := range PathNames {
		if cgnat[name] {
			if err := nft(ctx, ins, cgnatRuleset(l.opts.plan(name), v6only[name])); err != nil {
				return fmt.Errorf("path %s: cgnat: %w", name, err)
			}
		}
	}
	return nil
}

// sysctls makes a namespace behave like a host with several uplinks: no
// strict reverse-path filter, non-local binds allowed (AnyIP), no router
// advertisements.
func sysctls(ctx context.Context, ns string) error {
	kv := []string{
		"net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0",
		"net.ipv4.ip_nonlocal_bind=1", "net.ipv6.ip_nonlocal_bind=1",
		"net.ipv6.conf.all.accept_ra=0", "net.ipv6.conf.default.accept_ra=0",
		"net.ipv4.ping_group_range=0 2147483647",
	}
	return InNS(ns, func() error {
		var errs []error
		for _, s := range kv {
			k, v, _ := cutEq(s)
			if err := writeSysctl(k, v); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	})
}

func cutEq(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '=' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// writeSysctl writes /proc/sys; net.* entries are those of the calling
// thread's network namespace.
func writeSysctl(key, val string) error {
	p := "/proc/sys/"
	for _, c := range key {
		if c == '.' {
			p += "/"
		} else {
			p += string(c)
		}
	}
	if err := os.WriteFile(p, []byte(val), 0); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", key, val, err)
	}
	return nil
}

// ListenTCP opens a TCP listener (MPTCP-capable if mptcp) inside the
// Internet namespace.
func (l *Lab) ListenTCP(addr string, mptcp bool) (net.Listener, error) {
	var ln net.Listener
	err := InNS(l.info.Namespaces.Internet, func() error {
		// SO_REUSEPORT: the test server binds the server addresses' port
		// 443 beside the wildcard listener every target answers on; the
		// kernel gives a connection to the most specific one.
		lc := net.ListenConfig{Control: reusePort}
		lc.SetMultipathTCP(mptcp)
		var err error
		ln, err = lc.Listen(context.Background(), "tcp", addr)
		return err
	})
	if err == nil {
		l.addCloser(ln)
	}
	return ln, err
}

// ListenUDP opens a UDP socket inside the Internet namespace.
func (l *Lab) ListenUDP(addr string) (net.PacketConn, error) { return l.ListenUDPNet("udp", addr) }

// ListenUDPNet is ListenUDP for network udp, udp4 or udp6.
func (l *Lab) ListenUDPNet(network, addr string) (net.PacketConn, error) {
	var pc net.PacketConn
	err := InNS(l.info.Namespaces.Internet, func() error {
		var err error
		pc, err = net.ListenPacket(network, addr)
		return err
	})
	if err == nil {
		l.addCloser(pc)
	}
	return pc, err
}

// Context is done when the lab closes.
func (l *Lab) Context() context.Context { return l.ctx }

// Go runs fn in a goroutine Close waits for.
func (l *Lab) Go(fn func(ctx context.Context)) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		fn(l.ctx)
	}()
}

func (l *Lab) writeFiles() error {
	if err := writeConfig(l.info); err != nil {
		return err
	}
	if err := writeResolvConf(l.info); err != nil {
		return err
	}
	return writeJSONFile(l.info.Files.LabJSON, l.info)
}

// netnsEtc is where `ip netns exec NS` finds files to bind-mount over /etc.
func netnsEtc(ns string) string { return filepath.Join("/etc/netns", ns) }

// writeResolvConf gives programs run with `ip netns exec` in the client
// namespace a resolv.conf like a multihomed host's: the preferred path's
// resolver first. (mptester itself uses the per-path config.yaml.)
func writeResolvConf(i Info) error {
	dir := netnsEtc(i.Namespaces.Client)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# written by mptester lab %s; removed by lab down\n", i.Name)
	for _, p := range i.Paths {
		fmt.Fprintf(&b, "nameserver %s\n", p.Resolv4)
	}
	b.WriteString("options timeout:1 attempts:1\n")
	return os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte(b.String()), 0o644)
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Set applies a change to path name at run time.
func (l *Lab) Set(name string, c emu.Change) error {
	link, ok := l.links[name]
	if !ok {
		return fmt.Errorf("%w: %q (want wlan0 or wwan0)", ErrNoSuchPath, name)
	}
	link.Apply(c)
	return nil
}

// Impair applies c to path name's impairments (nftables rules in the
// Internet namespace, the emulator's MTU) and records them as truth.
func (l *Lab) Impair(name string, c ImpairChange) error {
	p, ok := Plan(name)
	if !ok || l.links[name] == nil {
		return fmt.Errorf("%w: %q (want wlan0 or wwan0)", ErrNoSuchPath, name)
	}
	l.impMu.Lock()
	defer l.impMu.Unlock()
	cur := l.impair[name]
	cur.NAT64 = l.opts.nat64Paths()[name]
	cur.NAT64No7050 = l.opts.no7050Paths()[name]
	cur.CGNAT = l.opts.cgnatPaths()[name]
	next, err := cur.Apply(c)
	if err != nil {
		return err
	}
	if next.NAT64 != cur.NAT64 || next.NAT64No7050 != cur.NAT64No7050 || next.CGNAT != cur.CGNAT {
		return fmt.Errorf("nat64 and cgnat are how a path is built: set them with lab up --%s nat64|cgnat", name)
	}
	ctx, cancel := context.WithTimeout(l.ctx, 10*time.Second)
	defer cancel()
	ns := l.info.Namespaces.Internet
	script, need := nftRuleset(p, next)
	_, had := nftRuleset(p, cur)
	switch {
	case need:
		err = nft(ctx, ns, script)
	case had:
		err = nft(ctx, ns, fmt.Sprintf("delete table inet %s\n", nftTable(p)))
	}
	if err != nil {
		return err
	}
	l.links[name].SetMTU(next.PMTU)
	l.portal[name].Store(next.Portal)
	l.impair[name] = next
	l.mu.Lock()
	var keep []ImpairmentTruth
	for _, t := range l.impTruth {
		if t.Path != name {
			keep = append(keep, t)
		}
	}
	l.impTruth = append(keep, impairTruth(p, ns, next, l.impTruth, time.Now().UTC())...)
	l.mu.Unlock()
	l.log.Info("lab impairments", "path", name, "settings", strings.Join(next.Settings(), " "))
	return nil
}

// nft runs an nft script in namespace ns.
func nft(ctx context.Context, ns, script string) error {
	if _, err := exec.LookPath("nft"); err != nil {
		return fmt.Errorf("%w: the lab's middlebox impairments need nftables (nft): %v", ErrUnsupported, err)
	}
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft in %s: %w: %s", ns, err, bytes.TrimSpace(out))
	}
	return nil
}

// StartTimeline applies events from now on in the background, recording
// when each really took effect (Status().Timeline). With kernelLink a
// down/up also sets the client interface down/up.
func (l *Lab) StartTimeline(scenario string, events []emu.Event, kernelLink bool) {
	tr := &TimelineTruth{Scenario: scenario, KernelLink: kernelLink, Started: time.Now(), Steps: []Step{}}
	l.mu.Lock()
	l.truth = tr
	l.mu.Unlock()
	// The client's interfaces go down and up by ioctl on a socket opened
	// in the client namespace: microseconds, where an `ip` exec took
	// hundreds under load. Down: the kernel first, then the emulator (no
	// moment of a silent Wi-Fi the kernel still thinks is up); up: the
	// reverse.
	sock := -1
	if kernelLink {
		if err := InNS(l.info.Namespaces.Client, func() error {
			var err error
			sock, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			return err
		}); err != nil {
			l.log.Error("timeline: client socket", "err", err)
			sock = -1
		}
	}
	kernel := map[int]time.Time{}
	kernelErr := map[int]string{}
	setLink := func(i int) {
		e := events[i]
		if sock < 0 || e.Change.Down == nil {
			return
		}
		if err := setIfaceUp(sock, e.Path, !*e.Change.Down); err != nil {
			kernelErr[i] = err.Error()
		} else {
			kernel[i] = time.Now()
		}
	}
	l.Go(func(ctx context.Context) {
		if sock >= 0 {
			defer unix.Close(sock)
		}
		impErr := map[int]string{}
		err := emu.RunTimelineFunc(ctx, events, l.links, func(i int) {
			if d := events[i].Change.Down; d != nil && *d {
				setLink(i)
			}
			if ext := events[i].Extra; len(ext) > 0 {
				if _, ic, err := ParseSettings(ext); err != nil {
					impErr[i] = err.Error()
				} else if err := l.Impair(events[i].Path, ic); err != nil {
					impErr[i] = err.Error()
				}
			}
		}, func(i int, at time.Time) {
			e := events[i]
			if d := e.Change.Down; d != nil && !*d {
				setLink(i)
			}
			change := strings.TrimSpace(e.Change.String() + " " + strings.Join(e.Extra, " "))
			st := Step{At: e.At, Path: e.Path, Change: change, Applied: at, Kernel: kernel[i], Error: cmp.Or(kernelErr[i], impErr[i])}
			l.mu.Lock()
			tr.Steps = append(tr.Steps, st)
			l.mu.Unlock()
		})
		if err != nil && ctx.Err() == nil {
			l.log.Error("timeline", "err", err)
		}
		l.mu.Lock()
		tr.Done = err == nil
		l.mu.Unlock()
	})
}

// setIfaceUp sets interface name up or down through socket fd (its
// network namespace is the one acted on).
func setIfaceUp(fd int, name string, up bool) error {
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("%s flags: %w", name, err)
	}
	f := ifr.Uint16()
	if up {
		f |= unix.IFF_UP
	} else {
		f &^= unix.IFF_UP
	}
	ifr.SetUint16(f)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("%s set flags: %w", name, err)
	}
	return nil
}

// StartScenario starts the named scenario now.
func (l *Lab) StartScenario(name string) error {
	sc, ev, err := GetScenario(name)
	if err != nil {
		return err
	}
	l.StartTimeline(sc.Name, ev, sc.KernelLink)
	return nil
}

// Status returns the live parameters and counters of every path.
func (l *Lab) Status() Status {
	s := Status{Info: l.info, Uptime: time.Since(l.started).Round(time.Millisecond).String()}
	l.mu.Lock()
	if l.truth != nil {
		t := *l.truth
		t.Steps = slices.Clone(t.Steps)
		s.Timeline = &t
	}
	s.Impairments = slices.Clone(l.impTruth)
	l.mu.Unlock()
	var names []string
	for _, n := range PathNames {
		link := l.links[n]
		if link == nil {
			continue
		}
		s.Paths = append(s.Paths, PathStatus{Name: n, LinkDown: link.Down(),
			Up: link.Params(emu.Up), Down: link.Params(emu.Down), Stats: link.Stats()})
		names = append(names, n)
	}
	l.deviceDrops(s.Paths, names)
	return s
}

// deviceDrops fills each path's DropDevice: what its TUN devices' queues
// dropped before the emulator read them (tx_dropped of the client's TUN
// for Up, of the internet side's for Down). A lab whose emulator falls
// behind loses packets there, which its own counters never see.
func (l *Lab) deviceDrops(paths []PathStatus, names []string) {
	for _, side := range []struct {
		ns string
		up bool
	}{{l.info.Namespaces.Client, true}, {l.info.Namespaces.Internet, false}} {
		ifs := make([]string, len(names))
		for i, n := range names {
			p, _ := Plan(n)
			ifs[i] = p.Name
			if !side.up {
				ifs[i] = p.Router
			}
		}
		cs := make([]linkstats.Counters, len(ifs))
		if err := InNS(side.ns, func() error { return linkstats.Read(ifs, cs, nil) }); err != nil {
			l.log.Warn("lab status: device counters", "ns", side.ns, "err", err)
			continue
		}
		for i := range paths {
			if side.up {
				paths[i].Stats.Up.DropDevice = cs[i].TxDropped
			} else {
				paths[i].Stats.Down.DropDevice = cs[i].TxDropped
			}
		}
	}
}

// Close tears the lab down: emulators, sockets, processes left in its
// namespaces, the namespaces, and its state files except logs and world
// files. Safe to call more than once.
func (l *Lab) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	closers := l.closers
	l.mu.Unlock()
	l.cancel()
	for _, c := range closers {
		_ = c.Close()
	}
	for _, link := range l.links {
		_ = link.Close()
	}
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		l.log.Warn("lab goroutines did not stop within 5s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := CleanStale(ctx, l.opts.Name, l.opts.Dir)
	l.log.Info("lab down", "name", l.opts.Name)
	return err
}

func reusePort(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) })
	if err != nil {
		return err
	}
	return serr
}
