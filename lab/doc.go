// Package lab builds a reproducible multihomed testbed in network
// namespaces: a client with two emulated access paths (wlan0, wwan0) to a
// synthetic Internet whose answers are known in advance (ground truth).
//
// Address plan (only 198.18.0.0/15 and fd00::/8 are ever used):
//
//	path wlan0 link      198.18.1.0/24   client .2, router .1   fd00:1::/64 (::2, ::1)
//	path wwan0 link      198.18.2.0/24   client .2, router .1   fd00:2::/64 (::2, ::1)
//	resolver, wlan0 view 198.18.100.1    fd00:100::1   (reachable only via wlan0)
//	resolver, wwan0 view 198.18.100.2    fd00:100::2   (reachable only via wwan0)
//	test servers         198.18.200.1    fd00:200::1
//	targets, "public"    198.19.0.0/17   fd00:ff::/64  (AnyIP; the lab config marks them public)
//	targets, "private"   198.19.128.0/17 fd00:fe::/64  (AnyIP; treated as private/reserved)
//
// Paths are emulated in userspace (package lab/emu): each path is a pair of
// TUN devices, one in the client namespace and one in the Internet
// namespace, with a Go emulator between them adding delay, jitter, loss,
// rate limits, per-target extra delay and per-path unreachable targets.
// The RTT of target T through path P is 2*delay(P) + extra(T).
package lab
