//go:build !linux

package lab

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/mptester/mptester/lab/emu"
	"github.com/mptester/mptester/lab/world"
)

// Lab is Linux only.
type Lab struct{}

// Up is Linux only.
func Up(ctx context.Context, opts Options) (*Lab, error) {
	return nil, fmt.Errorf("the lab needs Linux network namespaces: %w", ErrUnsupported)
}

// CleanStale is Linux only.
func CleanStale(ctx context.Context, name, dir string) error { return nil }

// Leftovers is Linux only.
func Leftovers(name, dir string) []string { return nil }

func (l *Lab) Info() Info                          { return Info{} }
func (l *Lab) Link(name string) *emu.Link          { return nil }
func (l *Lab) Set(name string, c emu.Change) error { return ErrUnsupported }
func (l *Lab) Status() Status                      { return Status{} }

// Impair is Linux only.
func (l *Lab) Impair(name string, c ImpairChange) error { return ErrUnsupported }

// StartScenario is Linux only.
func (l *Lab) StartScenario(name string) error { return ErrUnsupported }
func (l *Lab) Context() context.Context        { return context.Background() }
func (l *Lab) Close() error                    { return nil }
func (l *Lab) World() *world.World             { return nil }

// InNS is Linux only.
func InNS(ns string, fn func() error) error { return ErrUnsupported }

// SetTestServer is Linux only.
func (l *Lab) SetTestServer(ts *TestServer) error { return ErrUnsupported }

// ListenTCP is Linux only.
func (l *Lab) ListenTCP(addr string, mptcp bool) (net.Listener, error) { return nil, ErrUnsupported }

// ListenUDPNet is Linux only.
func (l *Lab) ListenUDPNet(network, addr string) (net.PacketConn, error) { return nil, ErrUnsupported }

// DaemonPID is Linux only.
func DaemonPID(dir string) (int, bool) { return 0, false }

// WaitExit is Linux only.
func WaitExit(pid int, d time.Duration) bool { return true }
