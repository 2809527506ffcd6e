// Package interop holds, in its tests only, the QUIC interop runner's test
// cases (quic-interop-runner: handshake, transfer, multiplexing, retry,
// keyupdate, chacha20, rebinding, migration, amplification limit, loss,
// corruption and black holes) run against QUIC stacks mptester did not
// write, in both roles: mpquic's client against the peer's server and the
// peer's client against mpquic's server. Every case goes through a
// loopback UDP relay of the tests' own (relay_test.go) that drops,
// corrupts or rebinds at the runner's rates and records what it forwarded,
// so that each case checks the property itself (a Retry seen, the version
// on the wire, the peer's new address), not only the bytes.
//
// scripts/interop-matrix turns `go test -json` output of these tests into
// docs/interop.md.
package interop
