package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/mptester/mptester/probe"
)

// What iproute2 reports, decoded from `ip -j`. Parsing is OS-independent so
// the decoders are tested and fuzzed everywhere.

// MPTCPEndpoint is one `ip -j mptcp endpoint show` entry: the kernel path
// manager's per-address flags (host-wide, not per connection).
type MPTCPEndpoint struct {
	Address string `json:"address"`
	ID      int    `json:"id"`
	Subflow bool   `json:"subflow"`
	Signal  bool   `json:"signal"`
	Backup  bool   `json:"backup"`
	Dev     string `json:"dev"`
}

type mptcpLimitsJSON struct {
	Subflows        int `json:"subflows"`
	AddAddrAccepted int `json:"add_addr_accepted"`
}

type ruleJSON struct {
	Priority int    `json:"priority"`
	Src      string `json:"src"`
	SrcLen   *int   `json:"srclen"`
	Table    string `json:"table"`
	Action   string `json:"action"`
	// Suppress is set by `suppress_prefixlength N`: default routes (prefix
	// length 0) found through the rule are ignored.
	Suppress *int `json:"suppress_prefixlen"`
	// general is false when the rule selects on anything besides the
	// source (mark, device, port, uid, negation...), so it does not apply
	// to plain address-bound traffic.
	general bool
}

// ruleKeys are the fields that leave a rule applicable to any packet from
// a source address.
var ruleKeys = map[string]bool{"priority": true, "src": true, "srclen": true, "table": true,
	"action": true, "suppress_prefixlen": true, "protocol": true, "flags": true}

type nexthopJSON struct {
	Gateway string `json:"gateway"`
	Dev     string `json:"dev"`
}

type routeJSON struct {
	Type     string        `json:"type"`
	Dst      string        `json:"dst"`
	Gateway  string        `json:"gateway"`
	Dev      string        `json:"dev"`
	Table    string        `json:"table"`
	Metric   int           `json:"metric"`
	Nexthops []nexthopJSON `json:"nexthops"`
}

func (r routeJSON) table() string {
	if r.Table == "" {
		return "main"
	}
	return r.Table
}

func (r routeJSON) devs() []string {
	if r.Dev != "" {
		return []string{r.Dev}
	}
	var d []string
	for _, nh := range r.Nexthops {
		d = append(d, nh.Dev)
	}
	return d
}

func (r routeJSON) isDefault() bool {
	return r.Dst == "default" || r.Dst == "0.0.0.0/0" || r.Dst == "::/0"
}

// ParseEndpoints decodes `ip -j mptcp endpoint show`.
func ParseEndpoints(b []byte) ([]MPTCPEndpoint, error) {
	var eps []MPTCPEndpoint
	if len(strings.TrimSpace(string(b))) == 0 {
		return eps, nil // older iproute2 prints nothing for an empty list
	}
	if err := json.Unmarshal(b, &eps); err != nil {
		return nil, fmt.Errorf("decode `ip -j mptcp endpoint show`: %w", err)
	}
	return eps, nil
}

// ReadEndpoints reads the kernel path manager's endpoints; nil when they
// cannot be read (not Linux, or no iproute2 MPTCP support).
func ReadEndpoints(ctx context.Context) []MPTCPEndpoint {
	if runtime.GOOS != "linux" {
		return nil
	}
	b, err := exec.CommandContext(ctx, "ip", "-j", "mptcp", "endpoint", "show").Output()
	if err != nil {
		return nil
	}
	eps, err := ParseEndpoints(b)
	if err != nil || eps == nil {
		return nil
	}
	return eps
}

// parseLimits accepts JSON and the plain "add_addr_accepted 0 subflows 2"
// that iproute2 up to 6.x prints even with -j.
func parseLimits(b []byte) (mptcpLimitsJSON, error) {
	var l mptcpLimitsJSON
	s := strings.TrimSpace(string(b))
	if strings.HasPrefix(s, "{") {
		if err := json.Unmarshal(b, &l); err != nil {
			return l, fmt.Errorf("decode `ip -j mptcp limits show`: %w", err)
		}
		return l, nil
	}
	f := strings.Fields(s)
	seen := 0
	for i := 0; i+1 < len(f); i += 2 {
		n, err := strconv.Atoi(f[i+1])
		if err != nil {
			return l, fmt.Errorf("decode `ip mptcp limits show`: %q is not a number", f[i+1])
		}
		switch f[i] {
		case "subflows":
			l.Subflows, seen = n, seen+1
		case "add_addr_accepted":
			l.AddAddrAccepted, seen = n, seen+1
		}
	}
	if seen == 0 {
		return l, fmt.Errorf("decode `ip mptcp limits show`: no limits in %q", s)
	}
	return l, nil
}

func parseRules(b []byte) ([]ruleJSON, error) {
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("decode `ip -j rule show`: %w", err)
	}
	rules := make([]ruleJSON, 0, len(raw))
	for _, m := range raw {
		obj, _ := json.Marshal(m)
		var r ruleJSON
		if err := json.Unmarshal(obj, &r); err != nil {
			return nil, fmt.Errorf("decode `ip -j rule show`: %w", err)
		}
		r.general = true
		for k := range m {
			if !ruleKeys[k] {
				r.general = false
			}
		}
		rules = append(rules, r)
	}
	slices.SortStableFunc(rules, func(a, b ruleJSON) int { return a.Priority - b.Priority })
	return rules, nil
}

func parseRoutes(b []byte) ([]routeJSON, error) {
	var routes []routeJSON
	if err := json.Unmarshal(b, &routes); err != nil {
		return nil, fmt.Errorf("decode `ip -j route show table all`: %w", err)
	}
	return routes, nil
}

func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return a, err
	}
	return a.Unmap(), nil
}

// matches reports whether the rule's source selector covers ip.
func (r ruleJSON) matches(ip netip.Addr) bool {
	if r.Src == "" || r.Src == "all" {
		return true
	}
	a, err := parseAddr(r.Src)
	if err != nil || a.BitLen() != ip.BitLen() {
		return false
	}
	bits := a.BitLen()
	if r.SrcLen != nil {
		bits = *r.SrcLen
	}
	pfx, err := a.Prefix(bits)
	return err == nil && pfx.Contains(ip)
}

// lookupResult is where address-bound traffic leaves.
type lookupResult struct {
	dev      string
	table    string
	rulePrio int
	blocked  string // a rule or route that drops it
}

// lookupSource follows the rules in priority order, as fib_rules does for
// a packet from src to a destination only a default route covers.
func lookupSource(rules []ruleJSON, routes []routeJSON, src netip.Addr) lookupResult {
	for _, r := range rules {
		if !r.general || !r.matches(src) {
			continue
		}
		switch r.Action {
		case "", "to_tbl", "lookup":
		case "unreachable", "blackhole", "prohibit":
			return lookupResult{blocked: fmt.Sprintf("rule %d (%s)", r.Priority, r.Action), rulePrio: r.Priority}
		default: // goto, nop
			continue
		}
		if r.Suppress != nil {
			continue // a default route has prefix length 0: always suppressed
		}
		best := -1
		for i, rt := range routes {
			if rt.table() != r.Table || !rt.isDefault() {
				continue
			}
			if best < 0 || rt.Metric < routes[best].Metric {
				best = i
			}
		}
		if best < 0 {
			continue
		}
		rt := routes[best]
		switch rt.Type {
		case "", "unicast":
		default:
			return lookupResult{blocked: fmt.Sprintf("a %s default route in table %s", rt.Type, r.Table), rulePrio: r.Priority}
		}
		devs := rt.devs()
		if len(devs) == 0 {
			continue
		}
		return lookupResult{dev: devs[0], table: r.Table, rulePrio: r.Priority}
	}
	return lookupResult{}
}

func hasDefault(routes []routeJSON, table, dev string) bool {
	return slices.ContainsFunc(routes, func(r routeJSON) bool {
		return r.isDefault() && r.table() == table && slices.Contains(r.devs(), dev) && (r.Type == "" || r.Type == "unicast")
	})
}

// gateway is the next hop of dev's default route, preferring the main table.
func gateway(routes []routeJSON, dev string) string {
	gw := ""
	for _, r := range routes {
		if !r.isDefault() || r.Dev != dev || r.Gateway == "" {
			continue
		}
		if r.table() == "main" {
			return r.Gateway
		}
		if gw == "" {
			gw = r.Gateway
		}
	}
	return gw
}

// freeTable proposes a routing table for dev: 100+ifindex unless rules or
// routes already use it.
func freeTable(sys system, p probe.Path) int {
	used := map[string]bool{}
	for _, f := range []probe.Family{probe.Family4, probe.Family6} {
		for _, r := range sys.rules[f] {
			used[r.Table] = true
		}
		for _, r := range sys.routes[f] {
			used[r.table()] = true
		}
	}
	for t := 100 + p.Index; ; t++ {
		if !used[strconv.Itoa(t)] {
			return t
		}
	}
}

// system is everything the Linux checks read from iproute2.
type system struct {
	endpoints    []MPTCPEndpoint
	endpointsErr error
	limits       mptcpLimitsJSON
	limitsErr    error
	rules        map[probe.Family][]ruleJSON
	routes       map[probe.Family][]routeJSON
	routeErr     map[probe.Family]error
}

func gather(ctx context.Context, env *Env) system {
	sys := system{rules: map[probe.Family][]ruleJSON{}, routes: map[probe.Family][]routeJSON{},
		routeErr: map[probe.Family]error{}}
	if b, err := env.Command(ctx, "ip", "-j", "mptcp", "endpoint", "show"); err != nil {
		sys.endpointsErr = err
	} else {
		sys.endpoints, sys.endpointsErr = ParseEndpoints(b)
	}
	if b, err := env.Command(ctx, "ip", "-j", "mptcp", "limits", "show"); err != nil {
		sys.limitsErr = err
	} else {
		sys.limits, sys.limitsErr = parseLimits(b)
	}
	for _, f := range []probe.Family{probe.Family4, probe.Family6} {
		flag := "-" + strconv.Itoa(int(f))
		b, err := env.Command(ctx, "ip", flag, "-j", "rule", "show")
		if err == nil {
			sys.rules[f], err = parseRules(b)
		}
		if err == nil {
			b, err = env.Command(ctx, "ip", flag, "-j", "route", "show", "table", "all")
		}
		if err == nil {
			sys.routes[f], err = parseRoutes(b)
		}
		sys.routeErr[f] = err
	}
	return sys
}

// pathLayout splits the outward paths: the primary one carries default
// traffic; every secondary one must be set up for multipath.
type pathLayout struct {
	primary   *probe.Path
	secondary []probe.Path
	ignored   []string
}

// layout picks the primary path: the lowest-metric default route in the
// main table (IPv4 first), else the first path flagged with a default
// route, else the first outward path. Other outward paths count when they
// have a default route in some table, or are Wi-Fi or cellular.
func layout(paths []probe.Path, sys system) pathLayout {
	var lay pathLayout
	out := outwardPaths(paths)
	if len(out) == 0 {
		return lay
	}
	idx := func(name string) int {
		return slices.IndexFunc(out, func(p probe.Path) bool { return p.Name == name })
	}
	primary := -1
	for _, f := range []probe.Family{probe.Family4, probe.Family6} {
		best := -1
		for _, r := range sys.routes[f] {
			if !r.isDefault() || r.table() != "main" || (r.Type != "" && r.Type != "unicast") {
				continue
			}
			for _, d := range r.devs() {
				if i := idx(d); i >= 0 && (best < 0 || r.Metric < best) {
					best, primary = r.Metric, i
				}
			}
		}
		if primary >= 0 {
			break
		}
	}
	if primary < 0 {
		primary = max(slices.IndexFunc(out, func(p probe.Path) bool { return p.DefaultRoute }), 0)
	}
	lay.primary = &out[primary]
	for i, p := range out {
		if i == primary {
			continue
		}
		if p.DefaultRoute || p.Kind == probe.KindWiFi || p.Kind == probe.KindCellular || anyDefault(sys, p.Name) {
			lay.secondary = append(lay.secondary, p)
		} else {
			lay.ignored = append(lay.ignored, p.Name)
		}
	}
	return lay
}

func anyDefault(sys system, dev string) bool {
	for _, routes := range sys.routes {
		for _, r := range routes {
			if r.isDefault() && slices.Contains(r.devs(), dev) {
				return true
			}
		}
	}
	return false
}
