package lab

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// startNAT64 gives path name a stateful NAT64 (Debian's tayga on a TUN
// device in the Internet namespace) and a DNS64 resolver (unbound's dns64
// module on the path's IPv6 resolver address, forwarding to the path's
// world view on its IPv4 resolver address): real implementations nobody
// here wrote. The client side of the path has no IPv4 (topology).
func (l *Lab) startNAT64(ctx context.Context, name string) error {
	for _, bin := range []string{"tayga", "unbound"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%w: a nat64 path needs %s (apt-get install tayga unbound): %v", ErrUnsupported, bin, err)
		}
	}
	p, _ := Plan(name)
	n := NAT64Behind(name, l.opts.cgnatPaths()[name])
	ns := l.info.Namespaces.Internet
	dir := filepath.Join(l.opts.Dir, "nat64-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	conf := filepath.Join(dir, "tayga.conf")
	tc := fmt.Sprintf("tun-device %s\nipv4-addr %s\nprefix %s\ndynamic-pool %s\ndata-dir %s\n",
		n.TUN, n.Tayga4, n.Prefix, n.Pool, dir)
	if n.Client4.IsValid() {
		// Behind a CGNAT the client's IPv4 side is fixed (the truth names it).
		tc += fmt.Sprintf("map %s %s\n", n.Client4, p.Client6)
	}
	if err := os.WriteFile(conf, []byte(tc), 0o644); err != nil {
		return err
	}
	if err := run(ctx, "ip", "netns", "exec", ns, "tayga", "-c", conf, "--mktun"); err != nil {
		return err
	}
	if err := InNS(ns, func() error {
		var errs []string
		for _, kv := range [][2]string{{"net.ipv4.ip_forward", "1"}, {"net.ipv6.conf.all.forwarding", "1"}} {
			if err := writeSysctl(kv[0], kv[1]); err != nil {
				errs = append(errs, err.Error())
			}
		}
		if len(errs) > 0 {
			return fmt.Errorf("%s", strings.Join(errs, "; "))
		}
		return nil
	}); err != nil {
		return err
	}
	if err := ipBatch(ctx, ns, []string{
		"link set " + n.TUN + " up",
		fmt.Sprintf("addr add %s/32 dev %s", n.Host4, n.TUN),
		fmt.Sprintf("addr add %s/128 dev %s nodad", n.Host6, n.TUN),
		fmt.Sprintf("route add %s dev %s", n.Routed, n.TUN),
		fmt.Sprintf("route add %s dev %s", n.Prefix, n.TUN),
	}); err != nil {
		return err
	}
	if err := l.daemon(ns, filepath.Join(dir, "tayga.log"), "tayga", "-c", conf, "--nodetach"); err != nil {
		return err
	}
	uconf := filepath.Join(dir, "unbound.conf")
	// ipv4only.arpa and the world's zone are not unbound's to answer
	// locally; the lab's names (under "lab.") neither.
	ub := fmt.Sprintf(`server:
  interface: %s
  port: 53
  access-control: ::/0 allow
  access-control: 0.0.0.0/0 allow
  do-daemonize: no
  chroot: ""
  username: ""
  directory: %q
  pidfile: ""
  use-syslog: no
  logfile: ""
  verbosity: 1
  module-config: "dns64 iterator"
  dns64-prefix: %s
  do-not-query-localhost: no
  qname-minimisation: no
  local-zone: "ipv4only.arpa." nodefault
  local-zone: "lab." nodefault
  local-zone: "test." nodefault
forward-zone:
  name: "."
  forward-addr: %s@53
`, p.Resolv6, dir, n.Prefix, p.Resolv4)
	if l.opts.no7050Paths()[name] {
		// A DNS64 RFC 7050 discovery cannot see (clients need another
		// way to learn the prefix: RFC 8781 PREF64, configuration).
		ub = strings.Replace(ub, `local-zone: "ipv4only.arpa." nodefault`, `local-zone: "ipv4only.arpa." always_nxdomain`, 1)
	}
	if err := os.WriteFile(uconf, []byte(ub), 0o644); err != nil {
		return err
	}
	if err := l.daemon(ns, filepath.Join(dir, "unbound.log"), "unbound", "-c", uconf); err != nil {
		return err
	}
	// Ready when the DNS64 answers TCP on its address (unbound binds UDP
	// and TCP together).
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := InNS(ns, func() error {
			c, err := net.DialTimeout("tcp", netip.AddrPortFrom(p.Resolv6, 53).String(), 200*time.Millisecond)
			if err == nil {
				c.Close()
			}
			return err
		})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("unbound (DNS64) on [%s]:53 did not start: %v; see %s", p.Resolv6, err, filepath.Join(dir, "unbound.log"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	l.log.Info("nat64 path up", "path", name, "prefix", n.Prefix, "pool", n.Pool)
	return nil
}

// daemon starts a long-running program in namespace ns, logging to
// logFile; Close stops it (and CleanStale would kill it with the
// namespace's processes anyway).
func (l *Lab) daemon(ns, logFile, name string, args ...string) error {
	f, err := os.Create(logFile)
	if err != nil {
		return err
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, name}, args...)...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	f.Close()
	l.addCloser(procCloser{cmd})
	return nil
}

type procCloser struct{ cmd *exec.Cmd }

func (p procCloser) Close() error {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	return nil
}
