// Package netns runs code on an OS thread inside a named network
// namespace (/run/netns/NAME, as `ip netns add` makes one). Linux only.
package netns
