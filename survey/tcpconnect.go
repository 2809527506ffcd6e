package survey

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"

	"github.com/mptester/mptester/probe"
)

// defaultConnectCap stays below the kernel's initial SYN RTO (1 s).
const defaultConnectCap = 900 * time.Millisecond

// connectProber measures the TCP handshake with the OS's connect(): no
// privilege needed. Each attempt is capped below the SYN retransmission
// time; a refused connection (RST) is an answer.
type connectProber struct {
	path probe.Path
	cap  time.Duration
}

func newConnectProber(_ context.Context, p probe.Path, opts ProberOptions) (Prober, error) {
	c := opts.ConnectCap
	if c <= 0 {
		c = defaultConnectCap
	}
	return &connectProber{path: p, cap: c}, nil
}

func (c *connectProber) Close() error { return nil }

func (c *connectProber) Probe(ctx context.Context, t Target) Result {
	ctx, cancel := context.WithTimeout(ctx, c.cap)
	defer cancel()
	f := probe.FamilyOf(t.Addr)
	d, err := c.path.Dialer("tcp", f)
	if err != nil {
		return Result{Status: ProbeError, Err: err}
	}
	bytes := synBytes(t.Addr)
	addr := net.JoinHostPort(t.Addr.String(), strconv.Itoa(t.Port))
	start := time.Now()
	conn, err := d.DialContext(ctx, "tcp", addr)
	rtt := time.Since(start)
	switch {
	case err == nil:
		// Then the handshake's ACK and our RST, each with the timestamp
		// option when it was negotiated.
		seg := ipTCPHeader(t.Addr) + tcpTimestampOpt
		if tc, ok := conn.(*net.TCPConn); ok {
			if k, ts, ok := handshakeInfo(tc); ok {
				rtt = k // the kernel's own sample, free of scheduling delay
				if !ts {
					seg = ipTCPHeader(t.Addr)
				}
			}
			tc.SetLinger(0) // RST instead of FIN: no TIME_WAIT per probe
		}
		conn.Close()
		return Result{Kind: AnswerConnect, RTT: rtt, Status: ProbeSuccess, Bytes: bytes + 2*seg}
	case errors.Is(err, syscall.ECONNREFUSED):
		return Result{Kind: AnswerRST, RTT: rtt, Status: ProbeSuccess, Bytes: bytes}
	}
	return Result{Status: classifyErr(err), Err: err, Bytes: bytes}
}

// ipTCPHeader is the size of a bare TCP segment with its IP header.
func ipTCPHeader(a netip.Addr) int {
	if a.Is4() {
		return 40
	}
	return 60
}

// tcpTimestampOpt is the TCP timestamp option with its padding.
const tcpTimestampOpt = 12

// synBytes estimates a kernel SYN (MSS, SACK, timestamps, window scale).
func synBytes(a netip.Addr) int { return ipTCPHeader(a) + 20 }

func ipHeader(a netip.Addr) int {
	if a.Is4() {
		return 20
	}
	return 40
}
