package rawprobe

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

// DefaultConnectCap stays below the kernel's initial SYN RTO (1 s).
const DefaultConnectCap = 900 * time.Millisecond

// connectProber measures the TCP handshake with the OS's connect(): no
// privilege needed. Each attempt is capped below the SYN retransmission
// time; a refused connection (RST) is an answer.
type connectProber struct {
	path probe.Path
	cap  time.Duration
}

func newConnectProber(_ context.Context, p probe.Path, opts Options) (Engine, error) {
	c := opts.ConnectCap
	if c <= 0 {
		c = DefaultConnectCap
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
	bytes := SynBytes(t.Addr)
	addr := net.JoinHostPort(t.Addr.String(), strconv.Itoa(t.Port))
	start := time.Now()
	conn, err := d.DialContext(ctx, "tcp", addr)
	rtt := time.Since(start)
	switch {
	case err == nil:
		// Then the handshake's ACK and our RST, each with the timestamp
		// option when it was negotiated.
		seg := IPTCPHeader(t.Addr) + TCPTimestampOpt
		if tc, ok := conn.(*net.TCPConn); ok {
			if k, ts, ok := handshakeInfo(tc); ok {
				rtt = k // the kernel's own sample, free of scheduling delay
				if !ts {
					seg = IPTCPHeader(t.Addr)
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

// IPTCPHeader is the size of a bare TCP segment with its IP header.
func IPTCPHeader(a netip.Addr) int {
	if a.Is4() {
		return 40
	}
	return 60
}

// TCPTimestampOpt is the TCP timestamp option with its padding.
const TCPTimestampOpt = 12

// SynBytes estimates a kernel SYN (MSS, SACK, timestamps, window scale).
func SynBytes(a netip.Addr) int { return IPTCPHeader(a) + 20 }

func IPHeader(a netip.Addr) int {
	if a.Is4() {
		return 20
	}
	return 40
}
