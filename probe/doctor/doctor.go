// Package doctor checks whether a host is set up for multipath measurement
// and, for every problem, names the exact command that fixes it.
//
// Checks read the system through Env, so tests can plant faults; by default
// Env reads the real /proc and runs the real iproute2.
package doctor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"

	"github.com/mptester/mptester/probe"
)

// Status of one check.
type Status string

const (
	StatusOK   Status = "ok"
	StatusWarn Status = "warn" // works, but some measurements are degraded or unavailable
	StatusFail Status = "fail" // multipath measurements will be wrong or impossible
)

// Check is one finding. Fix is the exact command that resolves a warn or
// fail ("" when none applies or none can be given).
type Check struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// Env is what the checks read. Zero fields mean "the real system".
type Env struct {
	// Paths are the host's interfaces (probe.Discover); nil means discover.
	Paths []probe.Path
	// ReadFile reads /proc files (capabilities, sysctls).
	ReadFile func(name string) ([]byte, error)
	// Command runs a program (iproute2) and returns its standard output.
	Command func(ctx context.Context, name string, args ...string) ([]byte, error)
	// Executable is the mptester binary named in setcap fixes.
	Executable string
	// Euid is the effective user id; nil means os.Geteuid().
	Euid *int
	// Portal, when set, measures each outward path for a captive portal
	// and returns what showed one ("" for none): probe.DetectPortal, which
	// sends DNS queries and an HTTP request, so only on request
	// (doctor --portal).
	Portal func(ctx context.Context, p probe.Path) string
	// V6Blackhole, when set, measures each outward path for an IPv6 black
	// hole and returns what showed one (probe.DetectV6Blackhole; doctor
	// --v6-blackhole).
	V6Blackhole func(ctx context.Context, p probe.Path) string
	// NAT64, when set, asks each outward path's DNS for its NAT64 prefix
	// (RFC 7050) and returns it ("" for none; doctor --nat64).
	NAT64 func(ctx context.Context, p probe.Path) string
}

func (e *Env) fill(ctx context.Context) error {
	if e.ReadFile == nil {
		e.ReadFile = os.ReadFile
	}
	if e.Command == nil {
		e.Command = runCommand
	}
	if e.Executable == "" {
		if exe, err := os.Executable(); err == nil {
			e.Executable = exe
		} else {
			e.Executable = "mptester"
		}
	}
	if e.Euid == nil {
		id := os.Geteuid()
		e.Euid = &id
	}
	if e.Paths == nil {
		paths, err := probe.Discover(ctx, probe.DiscoverOptions{})
		if err != nil {
			return err
		}
		e.Paths = paths
	}
	return nil
}

func runCommand(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// Run performs every check for this OS, in a stable order.
func Run(ctx context.Context, env Env) []Check {
	if err := env.fill(ctx); err != nil {
		return []Check{{ID: "paths", Title: "Network interfaces", Status: StatusFail,
			Detail: fmt.Sprintf("cannot list interfaces: %v", err)}}
	}
	out := append(runOS(ctx, &env), accessChecks(outwardPaths(env.Paths))...)
	if env.Portal != nil {
		out = append(out, measuredChecks(ctx, outwardPaths(env.Paths), env.Portal, portalCheck)...)
	}
	if env.NAT64 != nil {
		out = append(out, measuredChecks(ctx, outwardPaths(env.Paths), env.NAT64, nat64Check)...)
	}
	if env.V6Blackhole != nil {
		out = append(out, measuredChecks(ctx, outwardPaths(env.Paths), env.V6Blackhole, v6BlackholeCheck)...)
	}
	return out
}

// measuredChecks run detect on every path at once and make each path's
// check from what it found ("" for nothing): a path without a finding
// says so too (the check ran).
func measuredChecks(ctx context.Context, paths []probe.Path, detect func(context.Context, probe.Path) string, check func(p probe.Path, found string) Check) []Check {
	found := make([]string, len(paths))
	var wg sync.WaitGroup
	for i, p := range paths {
		wg.Go(func() { found[i] = detect(ctx, p) })
	}
	wg.Wait()
	out := make([]Check, 0, len(paths))
	for i, p := range paths {
		out = append(out, check(p, found[i]))
	}
	return out
}

// portalCheck names a captive portal with what it means for measurements.
func portalCheck(p probe.Path, why string) Check {
	c := Check{ID: "access." + p.Name + ".portal", Title: "Captive portal on " + p.Name, Status: StatusOK,
		Detail: "none seen: names that cannot exist (.invalid) do not resolve to a portal through " + p.Name + "'s DNS"}
	if why != "" {
		c.Title = p.Name + " is behind a captive portal"
		c.Status = StatusFail
		c.Detail = why + ". Until someone logs in there, every name resolves to the portal and HTTPS fails verification: " +
			"measurements over " + p.Name + " reach the portal, not the Internet (survey stops the path: stopped_paths; run names the cause portal)"
	}
	return c
}

// nat64Check names a path's NAT64 prefix with what it means; an
// IPv6-only path without one warns.
func nat64Check(p probe.Path, prefix string) Check {
	c := Check{ID: "access." + p.Name + ".nat64", Title: "NAT64 on " + p.Name, Status: StatusOK,
		Detail: "none: " + p.Name + "'s DNS does not synthesize ipv4only.arpa (RFC 7050)"}
	_, has4 := globalAddr(p, probe.Family4)
	switch {
	case prefix != "":
		c.Title = p.Name + " is behind a NAT64"
		c.Detail = "prefix " + prefix + " (RFC 7050): IPv4 targets from " + p.Name + " go through a translator, their RTTs include it " +
			"(survey probes them at the synthesized address, route via-nat64, kept apart); synthesized AAAA answers count as the IPv4 they embed"
	case !has4:
		c.Status = StatusWarn
		c.Detail = p.Name + " is IPv6-only and its DNS reveals no NAT64 prefix (RFC 7050): IPv4 targets cannot be probed from it " +
			"(survey: no-source-address), and a DNS64's synthesized AAAA would count as IPv6 servers; if the network has a NAT64, give its prefix"
		c.Fix = "mptester survey --nat64-prefix " + p.Name + "=PREFIX"
	}
	return c
}

// v6BlackholeCheck names an IPv6 black hole with what it means.
func v6BlackholeCheck(p probe.Path, why string) Check {
	c := Check{ID: "access." + p.Name + ".v6-blackhole", Title: "IPv6 over " + p.Name, Status: StatusOK,
		Detail: "no black hole seen: the path's IPv6 resolvers answer (or it cannot tell: it needs an IPv6 address and both an IPv4 and an IPv6 resolver of its own)"}
	if why != "" {
		c.Title = p.Name + "'s IPv6 is black-holed"
		c.Status = StatusWarn
		c.Detail = why + ". IPv6 measurements over " + p.Name + " time out (survey: unresponsive; run names the cause v6-blackhole) although the path looks dual-stack: its IPv6 figures describe the black hole, not the servers"
	}
	return c
}

// accessChecks say what a path's addressing means for measurements (only
// for paths where it means something): IPv6-only (IPv4 targets skipped
// unless a NAT64 translates them) and carrier-grade NAT (no inbound).
func accessChecks(paths []probe.Path) []Check {
	var out []Check
	for _, p := range paths {
		_, has4 := globalAddr(p, probe.Family4)
		_, has6 := globalAddr(p, probe.Family6)
		if has6 && !has4 {
			out = append(out, Check{ID: "access." + p.Name + ".ipv6-only", Title: p.Name + " is IPv6-only", Status: StatusWarn,
				Detail: "IPv4 targets cannot be probed from " + p.Name + " (survey: no-source-address) unless a NAT64 translates them; " +
					"'mptester ifaces --nat64' asks its DNS for a NAT64 prefix (RFC 7050)",
				Fix: "mptester ifaces --nat64"})
		}
		for _, a := range p.Addrs {
			if probe.CGNAT.Contains(a.IP) {
				out = append(out, Check{ID: "access." + p.Name + ".cgnat", Title: p.Name + " is behind carrier-grade NAT", Status: StatusOK,
					Detail: fmt.Sprintf("%s is in 100.64.0.0/10 (RFC 6598): traffic leaves through a shared NAT; nothing can connect to %s from outside, so 'mptester serve' is unreachable there", a.IP, p.Name)})
				break
			}
		}
	}
	return out
}

// Worst returns the most severe status among checks (ok when empty).
func Worst(checks []Check) Status {
	worst := StatusOK
	for _, c := range checks {
		switch {
		case c.Status == StatusFail:
			return StatusFail
		case c.Status == StatusWarn:
			worst = StatusWarn
		}
	}
	return worst
}

// outward reports whether a path can carry measurements: up, not
// loopback, with at least one global address.
func outward(p probe.Path) bool {
	if !p.Up || p.Kind == probe.KindLoopback || slices.Contains(p.Flags, "loopback") {
		return false
	}
	return slices.ContainsFunc(p.Addrs, func(a probe.Addr) bool { return a.Scope == probe.ScopeGlobal })
}

// globalAddr returns the path's first global address of family f.
func globalAddr(p probe.Path, f probe.Family) (probe.Addr, bool) {
	for _, a := range p.Addrs {
		if a.Scope == probe.ScopeGlobal && probe.FamilyOf(a.IP) == f {
			return a, true
		}
	}
	return probe.Addr{}, false
}

// outwardPaths filters paths with outward.
func outwardPaths(paths []probe.Path) []probe.Path {
	var out []probe.Path
	for _, p := range paths {
		if outward(p) {
			out = append(out, p)
		}
	}
	return out
}

// dnsChecks: every measured path needs a resolver the survey can use from
// it; servers shared through resolv.conf work but are not the path's own.
func dnsChecks(paths []probe.Path) []Check {
	var out []Check
	for _, p := range paths {
		c := Check{ID: "dns." + p.Name, Title: "DNS servers for " + p.Name}
		own := 0
		var addrs []string
		for _, s := range p.DNS {
			addrs = append(addrs, s.Addr.String()+" ("+s.Source+")")
			if !s.Shared {
				own++
			}
		}
		switch {
		case own > 0:
			c.Status, c.Detail = StatusOK, strings.Join(addrs, ", ")
		case len(p.DNS) > 0:
			c.Status = StatusWarn
			c.Detail = "only system-wide servers, not known to belong to " + p.Name + ": " + strings.Join(addrs, ", ") +
				"; name the path's own resolver in the config file's dns section or with --dns"
			c.Fix = fmt.Sprintf("mptester survey --dns %s=RESOLVER_ADDR", p.Name)
		default:
			c.Status = StatusWarn
			c.Detail = "no DNS server found for " + p.Name + "; name one in the config file's dns section or with --dns"
			c.Fix = fmt.Sprintf("mptester survey --dns %s=RESOLVER_ADDR", p.Name)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		out = append(out, Check{ID: "dns", Title: "DNS servers", Status: StatusWarn,
			Detail: "no interface is up with a global address"})
	}
	return out
}
