package doctor

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/mptester/mptester/probe"
)

// quic-go asks for 7.5 MB socket buffers; less caps QUIC throughput on
// fast paths (and quic-go logs a warning on every connection).
const wantRmemMax = 7500000

// Bit numbers in CapEff (linux/capability.h).
const capNetRaw = 13

func runOS(ctx context.Context, env *Env) []Check {
	sys := gather(ctx, env)
	lay := layout(env.Paths, sys)

	checks := []Check{privileges(env), pathsCheck(lay)}
	checks = append(checks, mptcpEnabled(env))
	checks = append(checks, mptcpLimits(sys, lay))
	for _, p := range lay.secondary {
		checks = append(checks, mptcpEndpoint(sys, p))
	}
	for _, p := range lay.secondary {
		if c, ok := rpFilter(env, p); ok {
			checks = append(checks, c)
		}
	}
	for _, p := range lay.secondary {
		for _, f := range []probe.Family{probe.Family4, probe.Family6} {
			if c, ok := sourceRoute(sys, p, f); ok {
				checks = append(checks, c)
			}
		}
	}
	measured := lay.secondary
	if lay.primary != nil {
		measured = append([]probe.Path{*lay.primary}, lay.secondary...)
	}
	checks = append(checks, dnsChecks(measured)...)
	checks = append(checks, udpBuffer(env))
	return checks
}

// sysctl reads /proc/sys/KEY (KEY with slashes) as an integer.
func sysctl(env *Env, key string) (int, error) {
	b, err := env.ReadFile("/proc/sys/" + key)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("/proc/sys/%s: %q is not a number", key, strings.TrimSpace(string(b)))
	}
	return n, nil
}

// sysctlName is the dotted name sysctl(8) takes; dots inside an interface
// name (VLANs such as eth0.100) are written as slashes there.
func sysctlName(parts ...string) string {
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(p, ".", "/")
	}
	return strings.Join(parts, ".")
}

func privileges(env *Env) Check {
	c := Check{ID: "privileges", Title: "Raw sockets (root or CAP_NET_RAW)"}
	capRaw := false
	if b, err := env.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
				if bits, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil {
					capRaw = bits&(1<<capNetRaw) != 0
				}
			}
		}
	}
	switch {
	case capRaw && *env.Euid == 0:
		c.Status, c.Detail = StatusOK, "running as root with CAP_NET_RAW"
	case capRaw:
		c.Status, c.Detail = StatusOK, "CAP_NET_RAW is effective"
	default:
		c.Status = StatusWarn
		c.Detail = "neither root nor CAP_NET_RAW: ICMP and raw probes fall back to unprivileged sockets or are skipped"
		c.Fix = "sudo setcap cap_net_raw+ep " + env.Executable
	}
	return c
}

func pathsCheck(lay pathLayout) Check {
	c := Check{ID: "paths", Title: "Paths out of the host"}
	if lay.primary == nil {
		c.Status, c.Detail = StatusFail, "no interface is up with a global address"
		return c
	}
	names := []string{lay.primary.Name + " (primary)"}
	for _, p := range lay.secondary {
		names = append(names, p.Name)
	}
	c.Detail = strings.Join(names, ", ")
	if len(lay.ignored) > 0 {
		c.Detail += "; ignored (no default route in any table): " + strings.Join(lay.ignored, ", ")
	}
	if len(lay.secondary) == 0 {
		c.Status = StatusWarn
		c.Detail += "; only one path: nothing to compare or aggregate"
		return c
	}
	c.Status = StatusOK
	return c
}

func mptcpEnabled(env *Env) Check {
	c := Check{ID: "mptcp.enabled", Title: "MPTCP enabled (net.mptcp.enabled)"}
	v, err := sysctl(env, "net/mptcp/enabled")
	switch {
	case err != nil:
		c.Status, c.Detail = StatusWarn, "kernel without MPTCP (no net.mptcp.enabled): MPTCP runs fall back to TCP"
	case v == 0:
		c.Status, c.Detail = StatusWarn, "net.mptcp.enabled = 0: MPTCP sockets fall back to plain TCP"
		c.Fix = "sudo sysctl -w net.mptcp.enabled=1"
	default:
		c.Status, c.Detail = StatusOK, "net.mptcp.enabled = "+strconv.Itoa(v)
	}
	return c
}

func mptcpLimits(sys system, lay pathLayout) Check {
	c := Check{ID: "mptcp.limits", Title: "MPTCP path manager limits"}
	if sys.limitsErr != nil {
		c.Status, c.Detail = StatusWarn, "cannot read MPTCP limits: "+sys.limitsErr.Error()
		return c
	}
	need := max(len(lay.secondary), 1)
	c.Detail = fmt.Sprintf("subflows %d, add_addr_accepted %d; %d non-primary path(s)",
		sys.limits.Subflows, sys.limits.AddAddrAccepted, len(lay.secondary))
	if sys.limits.Subflows == 0 || sys.limits.Subflows < len(lay.secondary) {
		c.Status = StatusWarn
		c.Detail += ": the kernel will not open a subflow on every path"
		c.Fix = fmt.Sprintf("sudo ip mptcp limits set subflows %d add_addr_accepted %d", need, max(need, sys.limits.AddAddrAccepted))
		return c
	}
	c.Status = StatusOK
	return c
}

func mptcpEndpoint(sys system, p probe.Path) Check {
	c := Check{ID: "mptcp.endpoint." + p.Name, Title: "MPTCP subflow endpoint on " + p.Name}
	if sys.endpointsErr != nil {
		c.Status, c.Detail = StatusWarn, "cannot list MPTCP endpoints: "+sys.endpointsErr.Error()
		return c
	}
	addr, ok := globalAddr(p, probe.Family4)
	if !ok {
		addr, _ = globalAddr(p, probe.Family6)
	}
	var wrong *MPTCPEndpoint
	for i, e := range sys.endpoints {
		ip, _ := parseAddr(e.Address)
		if e.Dev != p.Name && !p.HasAddr(ip) {
			continue
		}
		if e.Subflow {
			c.Status = StatusOK
			c.Detail = fmt.Sprintf("endpoint id %d %s dev %s subflow", e.ID, e.Address, p.Name)
			return c
		}
		wrong = &sys.endpoints[i]
	}
	c.Status = StatusWarn
	add := fmt.Sprintf("sudo ip mptcp endpoint add %s dev %s subflow", addr.IP, p.Name)
	if wrong != nil {
		c.Detail = fmt.Sprintf("endpoint id %d for %s lacks the subflow flag: MPTCP connections will not use %s",
			wrong.ID, wrong.Address, p.Name)
		c.Fix = fmt.Sprintf("sudo ip mptcp endpoint delete id %d && %s", wrong.ID, add)
		return c
	}
	c.Detail = "no MPTCP endpoint for " + p.Name + ": MPTCP connections will not open a subflow over it"
	c.Fix = add
	return c
}

// rpFilter: strict reverse-path filtering (1) drops replies arriving on a
// path that is not the route back to their source, which is every
// non-primary path; loose (2) is fine. The kernel uses max(all, IFACE).
func rpFilter(env *Env, p probe.Path) (Check, bool) {
	if _, ok := globalAddr(p, probe.Family4); !ok {
		return Check{}, false // rp_filter is IPv4 only
	}
	c := Check{ID: "rp_filter." + p.Name, Title: "Reverse-path filter on " + p.Name}
	all, errAll := sysctl(env, "net/ipv4/conf/all/rp_filter")
	dev, errDev := sysctl(env, "net/ipv4/conf/"+p.Name+"/rp_filter")
	if errAll != nil || errDev != nil {
		c.Status, c.Detail = StatusWarn, fmt.Sprintf("cannot read rp_filter: %v", firstErr(errAll, errDev))
		return c, true
	}
	eff := max(all, dev)
	c.Detail = fmt.Sprintf("effective %d (all %d, %s %d)", eff, all, p.Name, dev)
	if eff == 1 {
		c.Status = StatusFail
		c.Detail += ": strict mode drops traffic returning over a non-primary path"
		// Setting the interface to 2 is enough: max(1, 2) = 2.
		c.Fix = "sudo sysctl -w " + sysctlName("net", "ipv4", "conf", p.Name, "rp_filter") + "=2"
		return c, true
	}
	c.Status = StatusOK
	return c, true
}

// sourceRoute walks the policy rules as the kernel would for traffic bound
// to the path's address (no mark, no device) and checks that the default
// route it ends on leaves through that path.
func sourceRoute(sys system, p probe.Path, f probe.Family) (Check, bool) {
	a, ok := globalAddr(p, f)
	if !ok {
		return Check{}, false
	}
	fam, ipf := "ipv4", "ip"
	if f == probe.Family6 {
		fam, ipf = "ipv6", "ip -6"
	}
	c := Check{ID: "route." + p.Name + "." + fam, Title: fmt.Sprintf("Route for traffic from %s (%s)", a.IP, p.Name)}
	if err := sys.routeErr[f]; err != nil {
		c.Status, c.Detail = StatusWarn, "cannot read rules and routes: "+err.Error()
		return c, true
	}
	res := lookupSource(sys.rules[f], sys.routes[f], a.IP)
	if res.dev == p.Name {
		c.Status = StatusOK
		c.Detail = fmt.Sprintf("rule %d: from %s lookup %s -> default dev %s", res.rulePrio, a.IP, res.table, p.Name)
		return c, true
	}
	table := freeTable(sys, p)
	gw := gateway(sys.routes[f], p.Name)
	route := fmt.Sprintf("sudo %s route add default dev %s table %d", ipf, p.Name, table)
	if gw != "" {
		route = fmt.Sprintf("sudo %s route add default via %s dev %s table %d", ipf, gw, p.Name, table)
	}
	c.Fix = fmt.Sprintf("sudo %s rule add from %s table %d && %s", ipf, a.IP, table, route)
	where := "no default route"
	if res.dev != "" {
		where = fmt.Sprintf("default dev %s (rule %d, table %s)", res.dev, res.rulePrio, res.table)
	} else if res.blocked != "" {
		where = res.blocked
	}
	if hasDefault(sys.routes[f], "main", p.Name) {
		// Sockets bound to the device still work through the main table.
		c.Status = StatusWarn
		c.Detail = fmt.Sprintf("traffic from %s goes to %s; only device-bound sockets reach %s's own default route", a.IP, where, p.Name)
		return c, true
	}
	c.Status = StatusFail
	c.Detail = fmt.Sprintf("traffic from %s goes to %s and %s has no default route in the main table", a.IP, where, p.Name)
	return c, true
}

func udpBuffer(env *Env) Check {
	c := Check{ID: "udp.rmem_max", Title: "UDP receive buffer limit for QUIC (net.core.rmem_max)"}
	v, err := sysctl(env, "net/core/rmem_max")
	switch {
	case err != nil:
		c.Status, c.Detail = StatusWarn, "cannot read net.core.rmem_max: "+err.Error()
	case v < wantRmemMax:
		c.Status = StatusWarn
		c.Detail = fmt.Sprintf("net.core.rmem_max = %d < %d: QUIC throughput is capped", v, wantRmemMax)
		c.Fix = fmt.Sprintf("sudo sysctl -w net.core.rmem_max=%d", wantRmemMax)
	default:
		c.Status, c.Detail = StatusOK, fmt.Sprintf("net.core.rmem_max = %d", v)
	}
	return c
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
