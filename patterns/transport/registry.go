package transport

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Descriptor is everything the rest of mptester knows about a transport
// (in the spirit of blackbox_exporter's prober map and zgrab2's module
// registry: adding a transport is adding a file).
type Descriptor struct {
	// Name as given to --transports and recorded in results.
	Name string
	// Help is one line for help texts.
	Help string
	// Order places the transport in the matrix and in listings (lower
	// first; equal orders sort by name).
	Order int
	// Network of the server socket: "tcp" or "udp".
	Network string
	// DefaultPort of the server; AltPort, when not 0, is a second port the
	// server listens on by default and the smoke check tries (000 §III:
	// QUIC on 6121 reveals middleboxes that only treat UDP 443 specially).
	DefaultPort, AltPort uint16
	// Multipath transports span every selected path in one connection: the
	// matrix gives them one row per family, not one per path.
	Multipath bool
	// SourceBound transports bind their sockets to a path by source
	// address only, not to its device (MPTCP: a device binding would pin
	// every subflow), so the route from that address decides which
	// interface really carries them; `run` checks it before trusting a
	// path.
	SourceBound bool
	// HostRoles transports take a path's backup role from the host, not
	// per connection (MPTCP: the kernel's endpoint flags, `ip mptcp
	// endpoint ... backup`), so `run` checks --backup against the host.
	HostRoles bool
	// Handover transports keep a connection alive across the loss of its
	// primary path; mobile mode runs each of them side by side.
	Handover bool
	// Families the transport carries (FamilyHTTP, stream patterns' ALPNs);
	// nil: every family. An HTTP-only transport (MPHTTP's byte ranges)
	// lists FamilyHTTP and the matrix gives it only the HTTP patterns.
	Families []string
	// New builds the client side for the options (Options.Paths[0] is the
	// primary path).
	New func(o Options) (Transport, error)
	// Listen opens the server side; nil for a client-only transport, which
	// reaches the listener of ServedBy.
	Listen func(ctx context.Context, o ListenOptions) (Listener, error)
	// ServedBy names the transport whose listener serves this one (mptcp
	// is served by tcp's MPTCP-capable listener); "" when it listens itself.
	ServedBy string
	// HeaderOverhead is the most the bytes on the wire (IP packets) of a
	// direction exceed the transport's own byte counter of that direction,
	// as a fraction, when both directions carry the same amount of data:
	// IP and transport headers, options, and acks the counter does not
	// count. The conformance suite holds every transport to its statement
	// against the lab emulator's counters.
	HeaderOverhead float64
	// Summarise turns a test's connections into the record's transport
	// summary (nil: none).
	Summarise func(conns []ConnSamples) Fact
}

// ConnSamples is one connection of a test and its samples, for Summarise.
type ConnSamples struct {
	Info    Info
	Samples []State
}

// Carries says whether the transport carries the ALPN family.
func (d *Descriptor) Carries(family string) bool {
	return d.Families == nil || slices.Contains(d.Families, family)
}

// Listener is the transport whose listener serves d: d itself or ServedBy.
func (d *Descriptor) Listener() string {
	if d.ServedBy != "" {
		return d.ServedBy
	}
	return d.Name
}

var (
	regMu    sync.RWMutex
	registry = map[string]*Descriptor{}
)

// Register adds a transport; a duplicate or incomplete descriptor panics
// (a programming error found at init). The returned function removes it
// again (for transports a test defines).
func Register(d Descriptor) (unregister func()) {
	if d.Name == "" || d.New == nil || d.HeaderOverhead < 0 || (d.Listen == nil && d.ServedBy == "") || (d.Network != "tcp" && d.Network != "udp") {
		panic(fmt.Sprintf("transport: incomplete descriptor %+v", d))
	}
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[d.Name]; dup {
		panic("transport: duplicate transport " + d.Name)
	}
	registry[d.Name] = &d
	return func() {
		regMu.Lock()
		defer regMu.Unlock()
		delete(registry, d.Name)
	}
}

// Get returns the descriptor of the transport named name.
func Get(name string) (*Descriptor, error) {
	regMu.RLock()
	defer regMu.RUnlock()
	d, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("unknown transport %q (want %s)", name, strings.Join(namesLocked(), ", "))
	}
	return d, nil
}

// CheckName checks that name is a transport (a config file's or a flag's
// value).
func CheckName(name string) error {
	_, err := Get(name)
	return err
}

// CheckListener checks that name is a transport with a server side (the
// keys of serve's ports).
func CheckListener(name string) error {
	var names []string
	for _, d := range Listeners() {
		if d.Name == name {
			return nil
		}
		names = append(names, d.Name)
	}
	return fmt.Errorf("unknown listener %q (want one of %s)", name, strings.Join(names, ", "))
}

// Names lists every registered transport in matrix order.
func Names() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	return namesLocked()
}

// All returns every descriptor in matrix order.
func All() []*Descriptor {
	regMu.RLock()
	defer regMu.RUnlock()
	out := make([]*Descriptor, 0, len(registry))
	for _, n := range namesLocked() {
		out = append(out, registry[n])
	}
	return out
}

// Listeners returns the descriptors of the transports that listen
// themselves, in matrix order.
func Listeners() []*Descriptor {
	var out []*Descriptor
	for _, d := range All() {
		if d.Listen != nil {
			out = append(out, d)
		}
	}
	return out
}

func namesLocked() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := registry[a].Order - registry[b].Order; c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return names
}
