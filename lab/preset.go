package lab

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/mptester/mptester/lab/world"
)

// WorldPresets are the named worlds of `lab up --world NAME`: access
// networks as probes meet them, each a set of impairments and world
// shares on top of the generated world (its truth models them).
var WorldPresets = map[string]string{
	"mobile-v6only": "wwan0 IPv6-only cellular behind NAT64/DNS64 (tayga, unbound) whose IPv4 side is behind a CGNAT (100.64.2.2, nftables); wlan0 dual-stack Wi-Fi whose IPv6 is black-holed towards 15% of the hosts and UDP 443 blocked towards " + fmt.Sprint(MobileUDPBlocked),
}

// MobileV6Block is the mobile-v6only world's share of hosts whose IPv6
// wlan0 does not reach.
const MobileV6Block = 0.15

// MobileUDPBlocked are the prefixes towards which the mobile-v6only
// world's Wi-Fi drops UDP 443 (000 §III: middleboxes interfering with
// QUIC towards some servers): the test servers' IPv4 /24 (so run --smoke
// meets it over IPv4 and not over IPv6) and a block of the world's hosts.
var MobileUDPBlocked = []netip.Prefix{netip.MustParsePrefix("198.18.200.0/24"), netip.MustParsePrefix("198.19.1.0/24")}

// ApplyWorldPreset applies preset name to o; false when there is no such
// preset.
func ApplyWorldPreset(name string, o *Options) bool {
	if name != "mobile-v6only" {
		return false
	}
	yes := true
	if o.Impair == nil {
		o.Impair = map[string]ImpairChange{}
	}
	c := o.Impair["wwan0"]
	c.NAT64, c.CGNAT = &yes, &yes
	o.Impair["wwan0"] = c
	if w := o.Impair["wlan0"]; w.Block == nil { // a --wlan0 block= of the user's stays
		var rules []PortRule
		for _, p := range MobileUDPBlocked {
			rules = append(rules, PortRule{Proto: "udp", Port: 443, Prefix: p})
		}
		w.Block = &rules
		o.Impair["wlan0"] = w
	}
	sh := world.DefaultShares()
	if o.WorldShares != nil {
		sh = *o.WorldShares
	}
	if sh.FirstPathV6Block == 0 {
		sh.FirstPathV6Block = MobileV6Block
	}
	o.WorldShares = &sh
	return true
}

// WorldPresetNames lists the presets, sorted.
func WorldPresetNames() []string {
	var n []string
	for k := range WorldPresets {
		n = append(n, k)
	}
	slices.Sort(n)
	return n
}
