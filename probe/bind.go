package probe

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// This file is the one place that makes a socket leave through a chosen path.
// Every dialer in the project (DNS, probes, QUIC, TCP, MPTCP) goes through it.

// Control returns a net.Dialer/ListenConfig Control function that pins the
// socket to path p (SO_BINDTODEVICE, IP_BOUND_IF or IP_UNICAST_IF).
func (p Path) Control() func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = BindFD(fd, p, networkFamily(network)) })
		if err != nil {
			return err
		}
		return serr
	}
}

// BindFD pins an existing socket (e.g. a raw one) to path p.
func BindFD(fd uintptr, p Path, f Family) error {
	if err := bindToPath(fd, p, f); err != nil {
		return fmt.Errorf("bind socket to %s: %w", p.Name, err)
	}
	return nil
}

func networkFamily(network string) Family {
	switch network[len(network)-1] {
	case '4':
		return Family4
	case '6':
		return Family6
	}
	return FamilyAny
}

// destFamily picks the family from a network name or a literal destination.
func destFamily(network, address string) Family {
	if f := networkFamily(network); f != FamilyAny {
		return f
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		host = address
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return FamilyOf(ip)
	}
	return FamilyAny
}

// LocalAddrFor returns the source address path p uses towards a destination of
// family f, as a net.Addr for the given transport.
func (p Path) localAddr(transport string, f Family) (net.Addr, error) {
	src, ok := p.SourceAddr(f)
	if !ok {
		return nil, fmt.Errorf("%w: %s has no IPv%d address", ErrNoSourceAddr, p.Name, f)
	}
	ap := netip.AddrPortFrom(src, 0)
	if transport == "udp" {
		return net.UDPAddrFromAddrPort(ap), nil
	}
	return net.TCPAddrFromAddrPort(ap), nil
}

func transportOf(network string) string {
	if len(network) >= 3 && network[:3] == "udp" {
		return "udp"
	}
	return "tcp"
}

// Dialer returns a net.Dialer bound to path p for destinations of family f:
// bound to the device and to the path's source address, so neither the
// routing table nor a default route on another interface can move it.
func (p Path) Dialer(network string, f Family) (*net.Dialer, error) {
	if f == FamilyAny {
		f = networkFamily(network)
	}
	if f == FamilyAny {
		f = Family4
	}
	la, err := p.localAddr(transportOf(network), f)
	if err != nil {
		return nil, err
	}
	// The target guard (WithTargetGuard) runs in the dial's ControlContext.
	return &net.Dialer{LocalAddr: la, ControlContext: guardControl(p, p.Control())}, nil
}

// DialContext dials address over TCP or UDP through path p. The destination
// must be an IP literal (name resolution is per path and done by the caller).
func DialContext(ctx context.Context, p Path, network, address string) (net.Conn, error) {
	d, err := p.Dialer(network, destFamily(network, address))
	if err != nil {
		return nil, err
	}
	return d.DialContext(ctx, network, address)
}

// ListenUDP opens an unconnected UDP socket bound to path p (for DNS and
// QUIC), on its source address of family f and an ephemeral port.
func ListenUDP(ctx context.Context, p Path, f Family) (*net.UDPConn, error) {
	if f == FamilyAny {
		f = Family4
	}
	la, err := p.localAddr("udp", f)
	if err != nil {
		return nil, err
	}
	lc := net.ListenConfig{Control: p.Control()}
	network := "udp4"
	if f == Family6 {
		network = "udp6"
	}
	pc, err := lc.ListenPacket(ctx, network, la.String())
	if err != nil {
		return nil, err
	}
	return pc.(*net.UDPConn), nil
}

// MPTCPConn is a connection dialed with MPTCP requested. Negotiated says
// whether the peer really spoke MPTCP: the standard library silently falls
// back to plain TCP, and a measurement must not report TCP as MPTCP.
type MPTCPConn struct {
	*net.TCPConn
	Negotiated bool
}

// DialMPTCP dials address with MPTCP from path p. The socket is bound by
// source address only: SO_BINDTODEVICE on an MPTCP socket is copied to every
// subflow and would break the subflows the kernel opens on other interfaces.
func DialMPTCP(ctx context.Context, p Path, network, address string) (*MPTCPConn, error) {
	if !mptcpSupported {
		return nil, fmt.Errorf("MPTCP: %w", ErrUnsupported)
	}
	f := destFamily(network, address)
	if f == FamilyAny {
		f = Family4
	}
	la, err := p.localAddr("tcp", f)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{LocalAddr: la, ControlContext: guardControl(p, nil)}
	d.SetMultipathTCP(true)
	c, err := d.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	tc := c.(*net.TCPConn)
	used, err := tc.MultipathTCP()
	if err != nil {
		used = false
	}
	return &MPTCPConn{TCPConn: tc, Negotiated: used}, nil
}

// ListenRaw opens a raw IP socket for protocol proto ("icmp", "tcp") bound
// to path p on its source address of family f: what raw probers (tcp-syn,
// icmp) send and receive with. Needs root or CAP_NET_RAW.
func ListenRaw(ctx context.Context, p Path, f Family, proto string) (*net.IPConn, netip.Addr, error) {
	src, ok := p.SourceAddr(f)
	if !ok {
		return nil, netip.Addr{}, fmt.Errorf("%w: %s has no IPv%d address", ErrNoSourceAddr, p.Name, f)
	}
	network := "ip4:" + proto
	if f == Family6 {
		if proto == "icmp" {
			proto = "ipv6-icmp"
		}
		network = "ip6:" + proto
	}
	lc := net.ListenConfig{Control: p.Control()}
	pc, err := lc.ListenPacket(ctx, network, src.String())
	if err != nil {
		return nil, netip.Addr{}, err
	}
	return pc.(*net.IPConn), src, nil
}

// CheckRaw opens and closes a raw IP socket of family f for proto, bound
// to no path: whether raw probers can run here at all (root or
// CAP_NET_RAW) before a command writes anything. A refusal wraps
// os.ErrPermission.
func CheckRaw(f Family, proto string) error {
	network := "ip4:" + proto
	if f == Family6 {
		if proto == "icmp" {
			proto = "ipv6-icmp"
		}
		network = "ip6:" + proto
	}
	pc, err := net.ListenPacket(network, "")
	if err != nil {
		return err
	}
	return pc.Close()
}
