// Package probe is the probe host: the multihomed machine mptester runs
// on, as ProbeID names it in the fleet. It holds that host's network paths
// (interface discovery, Path), binding sockets to a path, per-path DNS and
// the dialers every measurement uses. It does not probe targets: the
// survey's probing engine is survey/internal/rawprobe. Platform code lives
// in _linux/_darwin/_windows files.
package probe

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Kind is what an interface is physically, as far as the OS tells.
type Kind string

const (
	KindWiFi     Kind = "wifi"
	KindCellular Kind = "cellular"
	KindEthernet Kind = "ethernet"
	KindLoopback Kind = "loopback"
	KindTunnel   Kind = "tunnel"
	KindUnknown  Kind = "unknown"
)

// Scope classifies an address: only global addresses identify a path to the
// Internet; link-local ones are kept for completeness.
type Scope string

const (
	ScopeGlobal    Scope = "global"
	ScopeLinkLocal Scope = "link-local"
	ScopeHost      Scope = "host"
)

// Addr is one address configured on a path.
type Addr struct {
	IP        netip.Addr `json:"ip"`
	PrefixLen int        `json:"prefix_len"`
	Scope     Scope      `json:"scope"`
}

// DNS server sources, in precedence order (highest first).
const (
	DNSSourceFlag            = "flag"
	DNSSourceConfig          = "config"
	DNSSourceSystemdResolved = "systemd-resolved"
	DNSSourceNetworkManager  = "networkmanager"
	DNSSourceScutil          = "scutil"
	DNSSourceAdapter         = "adapter"
	// DNSSourceResolvConf servers are shared by every path: the OS does not
	// say which interface they belong to.
	DNSSourceResolvConf = "resolv.conf"
)

// DNSServer is one resolver usable from a path and where we learnt it.
type DNSServer struct {
	Addr   netip.AddrPort `json:"addr"`
	Source string         `json:"source"`
	Shared bool           `json:"shared,omitempty"`
}

// Path is one network interface seen as a way out of the host.
type Path struct {
	Name         string      `json:"name"`
	Index        int         `json:"index"`
	Kind         Kind        `json:"kind"`
	Up           bool        `json:"up"`
	Flags        []string    `json:"flags"`
	MTU          int         `json:"mtu"`
	Addrs        []Addr      `json:"addresses"`
	DefaultRoute bool        `json:"default_route"`
	DNS          []DNSServer `json:"dns"`
}

// Family selects an IP version: 0 means either.
type Family int

const (
	FamilyAny Family = 0
	Family4   Family = 4
	Family6   Family = 6
)

// ParseFamily accepts "4", "6", "both"/"any"/"".
func ParseFamily(s string) (Family, error) {
	switch strings.ToLower(s) {
	case "4", "ipv4", "inet":
		return Family4, nil
	case "6", "ipv6", "inet6":
		return Family6, nil
	case "", "both", "any", "46":
		return FamilyAny, nil
	}
	return 0, fmt.Errorf("invalid address family %q (want 4, 6 or both)", s)
}

// FamilyOf returns the family of an address.
func FamilyOf(a netip.Addr) Family {
	if a.Unmap().Is4() {
		return Family4
	}
	return Family6
}

// SourceAddr returns the address the path uses as source for family f:
// the first global address, else a link-local one (IPv6 only).
func (p Path) SourceAddr(f Family) (netip.Addr, bool) {
	var fallback netip.Addr
	for _, a := range p.Addrs {
		if f != FamilyAny && FamilyOf(a.IP) != f {
			continue
		}
		switch a.Scope {
		case ScopeGlobal:
			return a.IP, true
		case ScopeHost:
			if p.Kind == KindLoopback && !fallback.IsValid() {
				fallback = a.IP
			}
		}
	}
	return fallback, fallback.IsValid()
}

// HasAddr reports whether ip is configured on the path.
func (p Path) HasAddr(ip netip.Addr) bool {
	return slices.ContainsFunc(p.Addrs, func(a Addr) bool { return a.IP == ip.Unmap() })
}

// ScopeOf classifies an address.
func ScopeOf(ip netip.Addr) Scope {
	switch {
	case ip.IsLoopback():
		return ScopeHost
	case ip.IsLinkLocalUnicast():
		return ScopeLinkLocal
	}
	return ScopeGlobal
}

// FindPath returns the path named name.
func FindPath(paths []Path, name string) (Path, error) {
	for _, p := range paths {
		if p.Name == name {
			return p, nil
		}
	}
	return Path{}, fmt.Errorf("%w: %q", ErrNoSuchPath, name)
}
