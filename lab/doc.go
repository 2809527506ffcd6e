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
//
// Topology (Up): namespaces mpt-NAME-c (client) and mpt-NAME-i (Internet).
// The client has wlan0 and wwan0 (TUN devices, created in the host
// namespace, moved and renamed), a default route per path (metric 100 for
// wlan0, 200 for wwan0), and source-address policy rules (from the wlan0
// addresses lookup table 101, wwan0 table 102, each with its own default
// route), IPv4 and IPv6. MPTCP: limits "subflows 2 add_addr_accepted 2" on
// both sides; the wwan0 addresses are "subflow" endpoints with dev wwan0
// ("subflow backup" with Options.CellBackup). The Internet side has the
// router ends r-wlan0 and r-wwan0, the resolvers and test servers on lo,
// and the target prefixes as local routes (AnyIP: every address answers).
// Each path's emulator drops the other path's resolver and the world's
// targets unreachable from that path, and adds per-target extra delay.
//
// Servers on every Internet address (Ports in lab.json): TCP 443 and 80
// accept and read until EOF; 5001 (MPTCP-capable) is a sink that replies
// with the byte count; 5002 (MPTCP-capable) sends the 8-byte big-endian
// count it is asked for; UDP 7 echoes from the address it was reached on.
// Closed ports answer RST, ICMP echo is answered by the kernel.
//
// Impairments (impair.go) make a path behave like a real access network:
// block=udp/443 (a filter), strip=mptcp (a middlebox removing MPTCP
// options), v6=blackhole, pmtu=N,icmp=drop (a path-MTU black hole). The
// first three are nftables rules in the Internet namespace matching the
// path's router interface; the last is the path emulator's MTU. Each is
// recorded in Status().Impairments (what, where, since when).
//
// State lives in Options.Dir: lab.json (Info), config.yaml (the per-path
// DNS servers and public prefixes as an mptester config file), tranco.csv,
// world.json, truth.json, and, for a daemon, control.sock, pid and lab.log.
// `mptester lab up` runs a lab in a background daemon driven through the
// control socket; tests use package lab/labtest to run one in-process.
package lab
