package bogon

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestEmbeddedPrivate: an IPv6 address that carries a private IPv4 one
// (NAT64 under the well-known or a discovered prefix, IPv4-mapped,
// IPv4-compatible) is as private as the IPv4 address; one that carries a
// public address is public.
func TestEmbeddedPrivate(t *testing.T) {
	nat64 := []netip.Prefix{netip.MustParsePrefix("2a00:64::/96"), netip.MustParsePrefix("2a00:1:2::/48"), netip.MustParsePrefix("2a00:9::/64")}
	lab := []netip.Prefix{netip.MustParsePrefix("198.19.0.0/17")}
	for a, want := range map[string]bool{
		"64:ff9b::a00:1":            true, // 10.0.0.1
		"64:ff9b::a9fe:a9fe":        true, // 169.254.169.254
		"64:ff9b::7f00:1":           true,
		"64:ff9b::6440:1":           true, // 100.64.0.1 (CGNAT)
		"64:ff9b::808:808":          false,
		"::a00:1":                   true, // IPv4-compatible
		"::808:808":                 true, // IPv4-compatible: refused whatever it carries
		"::ffff:10.0.0.1":           true,
		"::ffff:8.8.8.8":            false,
		"2a00:64::a00:1":            true, // discovered /96
		"2a00:64::808:808":          false,
		"2a00:1:2:a9:0:fea9:fe00:0": true,  // /48: 169.254.169.254 (bits 64-71 skipped)
		"2a00:1:2:808:8:808::":      false, // /48: 8.8.8.8
		"2a00:9::a:0:1:0":           true,  // /64: 10.0.0.1
		"64:ff9b::c613:1":           false, // 198.19.0.1, marked public
		"fd00::1":                   true,
		"2606:4700::1111":           false,
	} {
		t.Run(a, func(t *testing.T) {
			assert.Equal(t, want, Private(netip.MustParseAddr(a), lab, nat64))
		})
	}
	assert.True(t, Contains(netip.MustParseAddr("64:ff9b::a00:1"), nil), "Contains knows the well-known prefix")
}
