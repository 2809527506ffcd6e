package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// ErrTargetRefused: a destination the run's target policy forbids (a
// private, local or special-purpose address under --no-private).
var ErrTargetRefused = errors.New("target address refused")

// TargetGuard says whether a connection from path p may go to a; an error
// wraps ErrTargetRefused.
type TargetGuard func(p Path, a netip.Addr) error

type guardKey struct{}

// WithTargetGuard makes every dial made with ctx (DialContext, DialMPTCP,
// and the UDP transports' CheckTarget) ask g about its destination at the
// moment the socket connects, after the path's own name resolution: a
// check done earlier on another lookup could be rebound.
func WithTargetGuard(ctx context.Context, g TargetGuard) context.Context {
	return context.WithValue(ctx, guardKey{}, g)
}

// CheckTarget asks ctx's guard (if any) whether p may send to a. The UDP
// transports call it on the address they hand to QUIC: an unconnected
// socket has no dial for the guard to see.
func CheckTarget(ctx context.Context, p Path, a netip.Addr) error {
	g, _ := ctx.Value(guardKey{}).(TargetGuard)
	if g == nil {
		return nil
	}
	return g(p, a.Unmap())
}

// guardControl returns the dialer's ControlContext: the guard first (on
// the resolved remote address the kernel is about to connect to), then
// bind (nil: none).
func guardControl(p Path, bind func(network, address string, c syscall.RawConn) error) func(ctx context.Context, network, address string, c syscall.RawConn) error {
	return func(ctx context.Context, network, address string, c syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			if g, _ := ctx.Value(guardKey{}).(TargetGuard); g != nil {
				return fmt.Errorf("%w: %q is not an address", ErrTargetRefused, address) // fail closed
			}
		} else if err := CheckTarget(ctx, p, ap.Addr()); err != nil {
			return err
		}
		if bind == nil {
			return nil
		}
		return bind(network, address, c)
	}
}

// dialResolver dials a path's own DNS server: the owner's configuration,
// not a target, so no guard applies.
func dialResolver(ctx context.Context, p Path, network, address string) (net.Conn, error) {
	return DialContext(context.WithValue(ctx, guardKey{}, TargetGuard(nil)), p, network, address)
}
