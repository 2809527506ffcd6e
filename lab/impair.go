package lab

import (
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mptester/mptester/lab/emu"
	"github.com/mptester/mptester/probe"
)

// Impairments of one access path: what a real access network does to
// traffic beyond delay and loss (middleboxes, filters, black holes). They
// compose; each is ground truth in Status().Impairments. Settings syntax
// (lab set, lab up --wlan0/--wwan0, beside the emulator's settings):
//
//	block=udp/443[,tcp/80...]|off   drop client->Internet packets to these ports;
//	block=udp/443@198.18.40.0/24    only towards that destination prefix
//	strip=mptcp|mptcp-syn|off       remove MPTCP options (all segments, or SYNs only)
//	v6=blackhole|ok                 IPv6 addresses and routes stay, nothing is delivered
//	pmtu=1280,icmp=drop | pmtu=off  drop packets over 1280 bytes both ways, no ICMP
//	quic-interfere=443|off          drop each UDP flow to 443 after its first packets
//	portal|portal=off               a captive portal: every name resolves to the
//	                                portal, HTTP answers 302 to its login page,
//	                                HTTPS fails verification, nothing else passes
//	nat64                           (lab up only) IPv6-only path behind a stateful
//	                                NAT64 (tayga) with a DNS64 resolver (unbound)
//	nat64=no-rfc7050                the same, whose DNS64 answers ipv4only.arpa
//	                                NXDOMAIN (RFC 7050 discovery finds nothing)
//	cgnat                           (lab up only) the path's IPv4 address is in
//	                                100.64.0.0/10 behind a stateful NAT (nftables);
//	                                with nat64 it is the translator's IPv4 side
type Impair struct {
	NAT64 bool `json:"nat64,omitempty"`
	// NAT64No7050: the path's DNS64 does not synthesize ipv4only.arpa, so
	// RFC 7050 discovery finds no prefix there (setting nat64=no-rfc7050).
	NAT64No7050 bool       `json:"nat64_no_rfc7050,omitempty"`
	CGNAT       bool       `json:"cgnat,omitempty"`
	Block       []PortRule `json:"block,omitempty"`
	Strip       string     `json:"strip,omitempty"`
	V6Blackhole bool       `json:"v6_blackhole,omitempty"`
	PMTU        int        `json:"pmtu,omitempty"`
	ICMPDrop    bool       `json:"icmp_drop,omitempty"`
	// QUICInterfere: UDP flows to this port are cut after their first
	// QUICInterfereAfter packets (0: none).
	QUICInterfere int  `json:"quic_interfere,omitempty"`
	Portal        bool `json:"portal,omitempty"`
}

// QUICInterfereAfter is how many packets of a UDP flow a quic-interfere
// middlebox lets through before it drops the rest (as one expecting DTLS
// gives up on what it cannot parse): a QUIC handshake's first flight
// passes, the connection then stalls.
const QUICInterfereAfter = 3

// PortRule is one proto/port of a block list, towards every destination
// or only towards Prefix (a middlebox filtering some networks: 000 §III's
// UDP 443 blocked for some servers and not others).
type PortRule struct {
	Proto  string       `json:"proto"` // "udp" or "tcp"
	Port   int          `json:"port"`
	Prefix netip.Prefix `json:"prefix,omitzero"`
}

func (r PortRule) String() string {
	s := r.Proto + "/" + strconv.Itoa(r.Port)
	if r.Prefix.IsValid() {
		s += "@" + r.Prefix.String()
	}
	return s
}

// parsePortRule reads PROTO/PORT[@PREFIX] (a bare address is its host
// prefix).
func parsePortRule(r string) (PortRule, error) {
	r, at, scoped := strings.Cut(r, "@")
	proto, port, ok := strings.Cut(r, "/")
	n, err := strconv.Atoi(port)
	if !ok || (proto != "udp" && proto != "tcp") || err != nil || n < 1 || n > 65535 {
		return PortRule{}, fmt.Errorf("want block=PROTO/PORT[@PREFIX][,...] with PROTO udp or tcp and PORT 1-65535, or block=off (got %q)", r)
	}
	rule := PortRule{Proto: proto, Port: n}
	if scoped {
		pfx, err := netip.ParsePrefix(at)
		if a, aerr := netip.ParseAddr(at); err != nil && aerr == nil {
			pfx, err = a.Prefix(a.BitLen())
		}
		switch {
		case err != nil:
			return PortRule{}, fmt.Errorf("block %s/%d@%s: want a destination prefix such as 198.18.40.0/24 or fd00:40::/32: %v", proto, n, at, err)
		case pfx.Addr().Zone() != "":
			return PortRule{}, fmt.Errorf("block %s/%d@%s: a prefix has no zone", proto, n, at)
		case pfx != pfx.Masked():
			return PortRule{}, fmt.Errorf("block %s/%d@%s: host bits set (the prefix is %s)", proto, n, at, pfx.Masked())
		}
		rule.Prefix = pfx
	}
	return rule, nil
}

// nftMatch is r as an nft match (without the verdict).
func (r PortRule) nftMatch() string {
	m := fmt.Sprintf("meta l4proto %s th dport %d", r.Proto, r.Port)
	switch {
	case !r.Prefix.IsValid():
		return m
	case r.Prefix.Addr().Is4():
		return fmt.Sprintf("ip daddr %s %s", r.Prefix, m)
	}
	return fmt.Sprintf("ip6 daddr %s %s", r.Prefix, m)
}

// ImpairChange edits an Impair; nil fields are left unchanged.
type ImpairChange struct {
	NAT64         *bool
	NAT64No7050   *bool
	CGNAT         *bool
	Block         *[]PortRule
	Strip         *string
	V6Blackhole   *bool
	PMTU          *int
	ICMPDrop      *bool
	QUICInterfere *int
	Portal        *bool
}

// IsZero reports whether c changes nothing.
func (c ImpairChange) IsZero() bool {
	return c.NAT64 == nil && c.NAT64No7050 == nil && c.CGNAT == nil && c.Block == nil && c.Strip == nil && c.V6Blackhole == nil && c.PMTU == nil && c.ICMPDrop == nil && c.QUICInterfere == nil && c.Portal == nil
}

// Apply returns i with c applied, checked as a whole.
func (i Impair) Apply(c ImpairChange) (Impair, error) {
	if c.NAT64 != nil {
		i.NAT64 = *c.NAT64
	}
	if c.NAT64No7050 != nil {
		i.NAT64No7050 = *c.NAT64No7050
	}
	if c.CGNAT != nil {
		i.CGNAT = *c.CGNAT
	}
	if c.Block != nil {
		i.Block = slices.Clone(*c.Block)
	}
	if c.Strip != nil {
		i.Strip = *c.Strip
	}
	if c.V6Blackhole != nil {
		i.V6Blackhole = *c.V6Blackhole
	}
	if c.PMTU != nil {
		i.PMTU = *c.PMTU
	}
	if c.ICMPDrop != nil {
		i.ICMPDrop = *c.ICMPDrop
	}
	if c.QUICInterfere != nil {
		i.QUICInterfere = *c.QUICInterfere
	}
	if c.Portal != nil {
		i.Portal = *c.Portal
	}
	// The emulator drops oversized packets but sends no Packet Too Big:
	// only the black hole is planted, and the setting must say so.
	if i.PMTU > 0 && !i.ICMPDrop {
		return i, fmt.Errorf("pmtu=%d needs icmp=drop: the lab plants path-MTU black holes only (it sends no Packet Too Big)", i.PMTU)
	}
	if i.NAT64No7050 && !i.NAT64 {
		return i, fmt.Errorf("no-rfc7050 is a NAT64's DNS64 (nat64=no-rfc7050)")
	}
	if i.ICMPDrop && i.PMTU == 0 {
		return i, fmt.Errorf("icmp=drop only goes with pmtu=N (a path-MTU black hole)")
	}
	return i, nil
}

// Settings renders i as one setting per impairment, in a fixed order.
func (i Impair) Settings() []string {
	var s []string
	switch {
	case i.NAT64 && i.NAT64No7050:
		s = append(s, "nat64=no-rfc7050")
	case i.NAT64:
		s = append(s, "nat64")
	}
	if i.CGNAT {
		s = append(s, "cgnat")
	}
	if len(i.Block) > 0 {
		var r []string
		for _, b := range i.Block {
			r = append(r, b.String())
		}
		s = append(s, "block="+strings.Join(r, ","))
	}
	if i.Strip != "" {
		s = append(s, "strip="+i.Strip)
	}
	if i.V6Blackhole {
		s = append(s, "v6=blackhole")
	}
	if i.PMTU > 0 {
		s = append(s, fmt.Sprintf("pmtu=%d,icmp=drop", i.PMTU))
	}
	if i.QUICInterfere > 0 {
		s = append(s, fmt.Sprintf("quic-interfere=%d", i.QUICInterfere))
	}
	if i.Portal {
		s = append(s, "portal")
	}
	return s
}

// ImpairmentTruth is one planted impairment as `lab status --json` shows
// it: what, on which path, where in the lab, since when.
type ImpairmentTruth struct {
	Path    string `json:"path"`
	Kind    string `json:"kind"`    // block, strip, v6, pmtu
	Setting string `json:"setting"` // as lab set takes it, e.g. block=udp/443
	Where   string `json:"where"`
	// Prefix is a NAT64 path's translator prefix (RFC 6052).
	Prefix string `json:"prefix,omitempty"`
	// A cgnat path's client address (100.64.0.0/10), the NAT's public
	// address servers see, and the cellular core server reachable only
	// from that path.
	Address string `json:"address,omitempty"`
	Public  string `json:"public,omitempty"`
	Core    string `json:"core,omitempty"`
	// Rules are a block's proto/ports, each with its destination prefix
	// when it has one.
	Rules []PortRule `json:"rules,omitempty"`
	Since time.Time  `json:"since"`
}

// impairKeys are the settings keys that are impairments, not the
// emulator's parameters.
var impairKeys = map[string]bool{"block": true, "strip": true, "v6": true, "pmtu": true, "icmp": true, "quic-interfere": true, "portal": true}

// buildKeys are the bare settings that say how a path is built (lab up
// only).
var buildKeys = map[string]bool{"nat64": true, "cgnat": true}

// ParseSettings splits settings tokens into the emulator's change and the
// impairments' (each argument may hold several space-separated tokens;
// "pmtu=1280,icmp=drop" is two). Errors name the bad token.
func ParseSettings(args []string) (emu.Change, ImpairChange, error) {
	var rest []string
	var ic ImpairChange
	for _, arg := range args {
		for _, tok := range strings.Fields(arg) {
			key, val, _ := strings.Cut(strings.ToLower(tok), "=")
			if key == "nat64" && val == "no-rfc7050" {
				t := true
				ic.NAT64, ic.NAT64No7050 = &t, &t
				continue
			}
			if buildKeys[key] && !strings.Contains(tok, "=") {
				t := true
				if key == "nat64" {
					ic.NAT64 = &t
				} else {
					ic.CGNAT = &t
				}
				continue
			}
			if key == "portal" && !strings.Contains(tok, "=") {
				t := true
				ic.Portal = &t
				continue
			}
			if !impairKeys[key] {
				rest = append(rest, tok)
				continue
			}
			for _, part := range splitKV(tok) {
				if err := ic.parseToken(part); err != nil {
					return emu.Change{}, ImpairChange{}, fmt.Errorf("bad setting %q: %w", part, err)
				}
			}
		}
	}
	c, err := emu.ParseChange(rest)
	if err != nil {
		return emu.Change{}, ImpairChange{}, err
	}
	return c, ic, nil
}

// splitKV splits "pmtu=1280,icmp=drop" into "pmtu=1280" and "icmp=drop":
// a comma starts a new setting when what follows holds '=' (block's list
// "udp/443,tcp/80" stays one).
func splitKV(tok string) []string {
	var out []string
	for _, p := range strings.Split(tok, ",") {
		if len(out) > 0 && !strings.Contains(p, "=") {
			out[len(out)-1] += "," + p
			continue
		}
		out = append(out, p)
	}
	return out
}

func (c *ImpairChange) parseToken(tok string) error {
	key, val, _ := strings.Cut(tok, "=")
	key, val = strings.ToLower(key), strings.ToLower(val)
	switch key {
	case "block":
		rules := []PortRule{}
		if val != "off" && val != "none" {
			for _, r := range strings.Split(val, ",") {
				rule, err := parsePortRule(r)
				if err != nil {
					return err
				}
				if !slices.Contains(rules, rule) {
					rules = append(rules, rule)
				}
			}
		}
		c.Block = &rules
	case "strip":
		switch val {
		case "mptcp", "mptcp-syn":
		case "off", "none":
			val = ""
		default:
			return fmt.Errorf("want strip=mptcp (every segment), strip=mptcp-syn (SYNs only) or strip=off")
		}
		c.Strip = &val
	case "v6":
		var b bool
		switch val {
		case "blackhole":
			b = true
		case "ok", "off":
		default:
			return fmt.Errorf("want v6=blackhole or v6=ok")
		}
		c.V6Blackhole = &b
	case "pmtu":
		n := 0
		if val != "off" {
			var err error
			n, err = strconv.Atoi(val)
			if err != nil || n < 576 || n > 9000 {
				return fmt.Errorf("want pmtu=BYTES in [576, 9000] or pmtu=off")
			}
		}
		c.PMTU = &n
	case "quic-interfere":
		n := 0
		if val != "off" {
			var err error
			n, err = strconv.Atoi(val)
			if err != nil || n < 1 || n > 65535 {
				return fmt.Errorf("want quic-interfere=PORT (1-65535) or quic-interfere=off")
			}
		}
		c.QUICInterfere = &n
	case "portal":
		var b bool
		switch val {
		case "on":
			b = true
		case "off":
		default:
			return fmt.Errorf("want portal, portal=on or portal=off")
		}
		c.Portal = &b
	case "icmp":
		var b bool
		switch val {
		case "drop":
			b = true
		case "pass", "ok":
		default:
			return fmt.Errorf("want icmp=drop or icmp=pass")
		}
		c.ICMPDrop = &b
	default:
		return fmt.Errorf("unknown impairment %q", key)
	}
	return nil
}

// nftTable is the nftables table of path p's impairments in the Internet
// namespace (the router side of the path, where a middlebox would sit).
func nftTable(p PathPlan) string { return "mpt_" + p.Name }

// nftRuleset renders i for path p as an nft script that replaces the
// path's table atomically ("" and false: no table needed, delete it).
func nftRuleset(p PathPlan, i Impair) (string, bool) {
	var pre, in, out []string
	iif := fmt.Sprintf("iifname %q ", p.Router)
	oif := fmt.Sprintf("oifname %q ", p.Router)
	if i.V6Blackhole {
		pre = append(pre, iif+"meta nfproto ipv6 counter drop")
	}
	if i.Strip != "" {
		m := "tcp option mptcp exists "
		if i.Strip == "mptcp-syn" {
			m = "tcp flags & syn == syn " + m
		}
		pre = append(pre, iif+m+"reset tcp option mptcp counter")
		out = append(out, oif+m+"reset tcp option mptcp counter")
	}
	for _, b := range i.Block {
		in = append(in, iif+b.nftMatch()+" counter drop")
	}
	var nat []string
	if i.Portal {
		// A captive portal before login: the path's DNS answers the portal
		// (world.Portal), TCP 80 and 443 to anywhere land on the portal's
		// servers, everything else but DNS is dropped.
		pre = append(pre, iif+"meta l4proto udp udp dport != 53 counter drop",
			iif+"meta l4proto tcp tcp dport != { 53, 80, 443 } counter drop")
		nat = append(nat, fmt.Sprintf("%stcp dport 80 counter redirect to :%d", iif, PortPortalHTTP),
			fmt.Sprintf("%stcp dport 443 counter redirect to :%d", iif, PortPortalHTTPS))
	}
	if i.QUICInterfere > 0 {
		// Conntrack's per-flow packet count (an nft rule reading it turns
		// the namespace's conntrack accounting on).
		in = append(in, fmt.Sprintf("%sudp dport %d ct original packets > %d counter drop", iif, i.QUICInterfere, QUICInterfereAfter))
	}
	if len(pre)+len(in)+len(out)+len(nat) == 0 {
		return "", false
	}
	t := nftTable(p)
	var s strings.Builder
	// Create-then-delete makes the delete valid whether or not the table
	// exists; the whole script is one transaction.
	fmt.Fprintf(&s, "table inet %s {}\ndelete table inet %s\ntable inet %s {\n", t, t, t)
	for _, c := range []struct {
		name, typ, hook string
		prio            int
		rules           []string
	}{{"pre", "filter", "prerouting", -300, pre}, {"portal", "nat", "prerouting", -100, nat}, {"in", "filter", "input", 0, in}, {"out", "filter", "output", -300, out}} {
		if len(c.rules) == 0 {
			continue
		}
		fmt.Fprintf(&s, "\tchain %s {\n\t\ttype %s hook %s priority %d; policy accept;\n", c.name, c.typ, c.hook, c.prio)
		for _, r := range c.rules {
			fmt.Fprintf(&s, "\t\t%s\n", r)
		}
		s.WriteString("\t}\n")
	}
	s.WriteString("}\n")
	return s.String(), true
}

// impairTruth lists i's impairments on path p with where they live;
// since keeps the time of a setting already planted before.
func impairTruth(p PathPlan, ns string, i Impair, prev []ImpairmentTruth, now time.Time) []ImpairmentTruth {
	var out []ImpairmentTruth
	nft := fmt.Sprintf("nftables table inet %s in namespace %s", nftTable(p), ns)
	for _, s := range i.Settings() {
		kind, _, _ := strings.Cut(s, "=")
		t := ImpairmentTruth{Path: p.Name, Kind: kind, Setting: s, Since: now}
		switch kind {
		case "block":
			t.Rules = slices.Clone(i.Block)
			t.Where = nft + fmt.Sprintf(", chain in: packets from %s to these ports dropped (towards the prefix after @ only, where one is named)", p.Router)
		case "strip":
			t.Where = nft + fmt.Sprintf(", chains pre and out: MPTCP options reset to NOPs on %s both ways", p.Router)
		case "v6":
			t.Where = nft + fmt.Sprintf(", chain pre: every IPv6 packet from %s dropped (the client keeps its IPv6 addresses and routes)", p.Router)
		case "pmtu":
			t.Where = fmt.Sprintf("emulator of path %s: packets over %d bytes dropped both ways, no ICMP", p.Name, i.PMTU)
		case "quic-interfere":
			t.Where = nft + fmt.Sprintf(", chain in: every UDP flow from %s to port %d dropped after its first %d packets (conntrack's count)", p.Router, i.QUICInterfere, QUICInterfereAfter)
		case "portal":
			t.Address = PortalAddr4.String() + " " + PortalAddr6.String()
			t.Where = nft + fmt.Sprintf(", chains pre and portal: TCP 80/443 from %s redirected to the portal's HTTP :%d (302 to its login page) and HTTPS :%d (a certificate for %s only), other traffic but DNS dropped; the path's DNS answers every name with the portal's addresses",
				p.Router, PortPortalHTTP, PortPortalHTTPS, PortalName)
		case "nat64":
			n := NAT64Behind(p.Name, i.CGNAT)
			t.Prefix = n.Prefix.String()
			t.Where = fmt.Sprintf("tayga (stateful NAT64, pool %s) on TUN %s and unbound (DNS64) on [%s]:53 in namespace %s; the client's %s has no IPv4",
				n.Pool, n.TUN, p.Resolv6, ns, p.Name)
			if i.NAT64No7050 {
				t.Where += "; the DNS64 answers ipv4only.arpa NXDOMAIN (RFC 7050 discovery finds no prefix)"
			}
			if i.CGNAT {
				t.Where += fmt.Sprintf("; tayga maps %s to %s (its IPv4 side, behind the CGNAT)", p.Client6, n.Client4)
			}
		case "cgnat":
			c := CGNATOf(p.Name)
			t.Address, t.Public, t.Core = c.Client4.String(), c.Public.String(), c.Core.String()
			t.Where = fmt.Sprintf("nftables table ip %s in namespace %s: %s's %s translated to %s (nat input), no new connection towards %s (filter output), %s served only to %s",
				cgnatTable(p.Name), ns, p.Name, c.Subnet4, c.Public, c.Subnet4, c.Core, p.Router)
			if i.NAT64 {
				n := NAT64Behind(p.Name, true)
				core, _ := probe.Embed4(n.Prefix, c.Core)
				t.Where = fmt.Sprintf("nftables table ip %s in namespace %s: the NAT64's IPv4 side %s (from TUN %s) translated to %s (nat input), no new connection towards %s (filter output), %s served only through %s's NAT64 (at %s)",
					cgnatTable(p.Name), ns, c.Subnet4, n.TUN, c.Public, c.Subnet4, c.Core, p.Name, core)
			}
		}
		for _, o := range prev {
			if o.Path == t.Path && o.Setting == t.Setting {
				t.Since = o.Since
			}
		}
		out = append(out, t)
	}
	return out
}

// NAT64 is the plan of a NAT64 path's translator: a network-specific
// prefix inside fd00::/8 (tayga refuses the well-known 64:ff9b::/96 for
// the lab's non-global IPv4 addresses, RFC 6052 §3.1) and a dynamic pool.
type NAT64 struct {
	Prefix netip.Prefix // RFC 6052 /96
	Pool   netip.Prefix // IPv4 addresses tayga maps clients to
	Tayga4 netip.Addr   // tayga's own IPv4 address (ICMP it originates)
	Host4  netip.Addr   // the Internet namespace's address on the TUN
	Host6  netip.Addr
	TUN    string
	// Behind a CGNAT: the translator's IPv4 side is the path's 100.64/10
	// subnet (Routed, towards the TUN), the client's IPv6 address is
	// mapped to Client4 in it (a tayga static map), and nftables SNAT
	// translates it to the CGNAT's public address.
	Routed  netip.Prefix
	Client4 netip.Addr
}

// NAT64Behind returns the NAT64 plan of path name, its IPv4 side behind
// the path's CGNAT when cgnat (lab up --PATH "nat64 cgnat").
func NAT64Behind(name string, cgnat bool) NAT64 {
	n := NAT64Of(name)
	if !cgnat {
		n.Routed = n.Pool
		return n
	}
	c := CGNATOf(name)
	a := c.Subnet4.Addr().As4()
	at := func(last byte) netip.Addr { a[3] = last; return netip.AddrFrom4(a) }
	n.Routed, n.Client4 = c.Subnet4, c.Client4
	n.Pool = netip.PrefixFrom(at(128), 25) // other IPv6 sources than the client's
	n.Tayga4, n.Host4 = at(1), at(254)
	return n
}

// NAT64Of returns the NAT64 plan of path name.
func NAT64Of(name string) NAT64 {
	// wwan0 (the cellular path, where NAT64 lives) gets fd00:64::/96.
	i := len(PathNames) - 1 - slices.Index(PathNames, name)
	return NAT64{
		Prefix: netip.MustParsePrefix(fmt.Sprintf("fd00:64:%x::/96", i)),
		Pool:   netip.MustParsePrefix(fmt.Sprintf("198.18.%d.0/24", 64+i)),
		Tayga4: netip.MustParseAddr(fmt.Sprintf("198.18.%d.1", 64+i)),
		Host4:  netip.MustParseAddr(fmt.Sprintf("198.18.%d.254", 64+i)),
		Host6:  netip.MustParseAddr(fmt.Sprintf("fd00:64:%x:ffff::1", i)),
		TUN:    "nat64-" + name,
	}
}

// IPv4OnlyARPA are the well-known addresses of ipv4only.arpa (RFC 7050
// §2.2): a DNS64 synthesizes them into the NAT64 prefix.
var IPv4OnlyARPA = []netip.Addr{netip.MustParseAddr("192.0.0.170"), netip.MustParseAddr("192.0.0.171")}

// ParseTimeline parses a timeline file whose lines may carry impairments
// beside the emulator's settings (emu.ParseTimeline's syntax), e.g.
//
//	t=5s wlan0 block=udp/443
//	t=10s wlan0 block=off loss=1%
func ParseTimeline(r io.Reader) ([]emu.Event, error) {
	return emu.ParseTimelineExtra(r, func(tok string) (bool, error) {
		_, ic, err := ParseSettings([]string{tok})
		if err != nil {
			if isImpairToken(tok) {
				return false, err
			}
			return false, nil // the emulator's: it says what is wrong
		}
		if ic.NAT64 != nil || ic.CGNAT != nil {
			return false, fmt.Errorf("%s is how a path is built (lab up --PATH %s), not a timeline step", tok, tok)
		}
		return !ic.IsZero(), nil
	})
}

// isImpairToken reports whether tok's key is an impairment's.
func isImpairToken(tok string) bool {
	key, _, _ := strings.Cut(strings.ToLower(tok), "=")
	return impairKeys[key] || (buildKeys[key] && !strings.Contains(tok, "="))
}

// ParseImpairSetting reads one whole impairment setting of a path
// ("block=udp/443 strip=mptcp"; "" or "none" is a clean path) as the change
// that sets exactly it: every impairment it does not name is cleared, so
// applying it after any other leaves nothing of the earlier one (a sweep's
// cells). Emulator parameters and nat64 (a path's build) are refused.
func ParseImpairSetting(s string) (ImpairChange, error) {
	var ic ImpairChange
	if t := strings.TrimSpace(s); t != "" && !strings.EqualFold(t, "none") {
		c, parsed, err := ParseSettings([]string{t})
		if err != nil {
			return ImpairChange{}, err
		}
		if c != (emu.Change{}) {
			return ImpairChange{}, fmt.Errorf("%q: only impairments here (block, strip, v6, pmtu, icmp, quic-interfere, portal), not emulator parameters", s)
		}
		if parsed.NAT64 != nil || parsed.CGNAT != nil {
			return ImpairChange{}, fmt.Errorf("%q: nat64 and cgnat are how a path is built (lab up --PATH nat64|cgnat), not a per-cell setting", s)
		}
		ic = parsed
	}
	noRules, none, off, zero := []PortRule{}, "", false, 0
	if ic.Block == nil {
		ic.Block = &noRules
	}
	if ic.Strip == nil {
		ic.Strip = &none
	}
	if ic.V6Blackhole == nil {
		ic.V6Blackhole = &off
	}
	if ic.PMTU == nil {
		ic.PMTU = &zero
	}
	if ic.ICMPDrop == nil {
		ic.ICMPDrop = &off
	}
	if ic.QUICInterfere == nil {
		ic.QUICInterfere = &zero
	}
	if ic.Portal == nil {
		ic.Portal = &off
	}
	if _, err := (Impair{}).Apply(ic); err != nil {
		return ImpairChange{}, fmt.Errorf("%q: %w", s, err)
	}
	return ic, nil
}
