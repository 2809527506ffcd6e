package rawprobe

import (
	"context"
	"math/rand/v2"

	"github.com/mptester/mptester/probe"
)

// synProber sends raw SYNs (hping3 -S) from a raw socket bound to the path
// (rawProber) and matches SYN-ACK and RST replies. The kernel has no socket
// for these connections, so it answers every SYN-ACK with a RST itself: no
// half-open connection is left on the server.
type synProber struct {
	rawProber
}

func newSynProber(_ context.Context, p probe.Path, opts Options) (Engine, error) {
	c := &synCodec{}
	c.port.Store(rand.Uint32N(synPortCount))
	return &synProber{rawProber{path: p, proto: "tcp", health: opts.Health, codec: c,
		hint: "needs root or CAP_NET_RAW; use --method tcp-connect otherwise"}}, nil
}
