package main

import (
	"bytes"
	"strings"
	"testing"
)

const sample = `{"Action":"run","Test":"TestInteropQuicGo"}
{"Action":"output","Test":"TestInteropQuicGo","Output":"    runner_test.go:194: peer quic-go v0.65.0\n"}
{"Action":"run","Test":"TestInteropQuicGo/handshake/mpquic-client"}
{"Action":"pass","Test":"TestInteropQuicGo/handshake/mpquic-client"}
{"Action":"fail","Test":"TestInteropQuicGo/handshake/mpquic-server"}
{"Action":"output","Test":"TestInteropQuicGo/handshake/mpquic-server","Output":"        runner_test.go:240: 3 mpquic connections, want 1\n"}
{"Action":"output","Test":"TestInteropQuicGo/amplificationlimit/mpquic-client","Output":"        runner_test.go:260: peer-note: overshoots by one datagram: 7680 bytes\n"}
{"Action":"pass","Test":"TestInteropQuicGo/amplificationlimit/mpquic-client"}
{"Action":"output","Test":"TestInteropQuicGo/connectionmigration/mpquic-client","Output":"        runner_test.go:200: unsupported: no preferred_address\n"}
{"Action":"skip","Test":"TestInteropQuicGo/connectionmigration/mpquic-client"}
{"Action":"pass","Test":"TestInteropQuicGo/connectionmigration/mpquic-server"}
{"Action":"output","Test":"TestInteropQuicGo/goodput/mpquic-client","Output":"        runner_test.go:293: figure: 9568 kbps, peer-to-peer 9595 kbps\n"}
{"Action":"pass","Test":"TestInteropQuicGo/goodput/mpquic-client"}
not json: build output
`

func TestMatrix(t *testing.T) {
	peers, err := read(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	write(&b, peers)
	out := b.String()
	for _, want := range []string{
		"## quic-go v0.65.0",
		"| handshake | pass | **FAIL** [1] |",
		"| amplificationlimit | pass | not run |",
		"| connectionmigration | unsupported [2] | pass |",
		"| goodput | pass (9568 kbps, peer-to-peer 9595 kbps) | not run |",
		"1. handshake/mpquic-server: 3 mpquic connections, want 1",
		"2. connectionmigration/mpquic-client: no preferred_address",
		"- amplificationlimit/mpquic-client: overshoots by one datagram: 7680 bytes",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}
