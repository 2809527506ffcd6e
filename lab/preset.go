package lab

import (
	"slices"

	"github.com/mptester/mptester/lab/world"
)

// WorldPresets are the named worlds of `lab up --world NAME`: access
// networks as probes meet them, each a set of impairments and world
// shares on top of the generated world (its truth models them).
var WorldPresets = map[string]string{
	"mobile-v6only": "wwan0 IPv6-only cellular behind NAT64/DNS64 (tayga, unbound); wlan0 dual-stack Wi-Fi whose IPv6 is black-holed towards 15% of the hosts",
}

// MobileV6Block is the mobile-v6only world's share of hosts whose IPv6
// wlan0 does not reach.
const MobileV6Block = 0.15

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
	c.NAT64 = &yes
	o.Impair["wwan0"] = c
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
