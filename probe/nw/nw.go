// Package nw is MPTCP on macOS through Network.framework: a TCP byte
// stream from an nw_connection with a multipath service, as a net.Conn,
// so that TLS, pinning and the traffic patterns are the same Go code as
// over Linux's kernel MPTCP.
//
// The framework's calls are behind the small API interface. The adapter
// (Dial, Conn) is plain Go and compiles everywhere, so its state machine,
// callbacks, partial reads, deadlines, cancellation and releases are tested
// on Linux against nwfake, which replays the framework's documented
// callback orders. Only the bindings (system_darwin.go, purego, no cgo) are
// darwin-only.
package nw

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"syscall"
)

// Object is a retained Network.framework object (nw_*_t); 0 is none.
// Every Object an API call returns carries one reference the caller gives
// back with API.Release.
type Object uintptr

// State is nw_connection_state_t.
type State int

const (
	StateInvalid   State = 0
	StateWaiting   State = 1
	StatePreparing State = 2
	StateReady     State = 3
	StateFailed    State = 4
	StateCancelled State = 5
)

func (s State) String() string {
	switch s {
	case StateInvalid:
		return "invalid"
	case StateWaiting:
		return "waiting"
	case StatePreparing:
		return "preparing"
	case StateReady:
		return "ready"
	case StateFailed:
		return "failed"
	case StateCancelled:
		return "cancelled"
	}
	return fmt.Sprintf("state(%d)", int(s))
}

// Service is nw_multipath_service_t: how Network.framework uses the
// interfaces of an MPTCP connection.
type Service int

const (
	ServiceDisabled    Service = 0
	ServiceHandover    Service = 1 // a second subflow only when the first path fails
	ServiceInteractive Service = 2 // the lowest-latency path, others on demand
	ServiceAggregate   Service = 3 // every path at once (needs a developer setting on the Mac)
)

// DefaultService is what --mptcp-service defaults to.
const DefaultService = ServiceInteractive

// ServiceNames are the values --mptcp-service takes.
var ServiceNames = []string{"handover", "interactive", "aggregate"}

func (s Service) String() string {
	switch s {
	case ServiceDisabled:
		return "disabled"
	case ServiceHandover:
		return "handover"
	case ServiceInteractive:
		return "interactive"
	case ServiceAggregate:
		return "aggregate"
	}
	return fmt.Sprintf("service(%d)", int(s))
}

// ParseService accepts handover, interactive or aggregate.
func ParseService(s string) (Service, error) {
	switch strings.ToLower(s) {
	case "handover":
		return ServiceHandover, nil
	case "interactive":
		return ServiceInteractive, nil
	case "aggregate":
		return ServiceAggregate, nil
	}
	return 0, fmt.Errorf("invalid MPTCP service %q (want %s)", s, strings.Join(ServiceNames, ", "))
}

// MarshalText writes the service's name.
func (s Service) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// InterfaceType is nw_interface_type_t.
type InterfaceType int

const (
	InterfaceOther    InterfaceType = 0
	InterfaceWiFi     InterfaceType = 1
	InterfaceCellular InterfaceType = 2
	InterfaceWired    InterfaceType = 3
	InterfaceLoopback InterfaceType = 4
)

func (t InterfaceType) String() string {
	switch t {
	case InterfaceOther:
		return "other"
	case InterfaceWiFi:
		return "wifi"
	case InterfaceCellular:
		return "cellular"
	case InterfaceWired:
		return "wired"
	case InterfaceLoopback:
		return "loopback"
	}
	return fmt.Sprintf("type(%d)", int(t))
}

// MarshalText writes the type's name.
func (t InterfaceType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// Interface is one nw_interface_t of a path, read out.
type Interface struct {
	Name  string        `json:"name"`
	Index int           `json:"index"`
	Type  InterfaceType `json:"type"`
}

// PathStatus is nw_path_status_t.
type PathStatus int

const (
	PathInvalid     PathStatus = 0
	PathSatisfied   PathStatus = 1
	PathUnsatisfied PathStatus = 2
	PathSatisfiable PathStatus = 3
)

func (s PathStatus) String() string {
	switch s {
	case PathSatisfied:
		return "satisfied"
	case PathUnsatisfied:
		return "unsatisfied"
	case PathSatisfiable:
		return "satisfiable"
	}
	return "invalid"
}

// MarshalText writes the status's name.
func (s PathStatus) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// PathInfo is what an nw_path_t of a connection says, read out.
type PathInfo struct {
	Status PathStatus `json:"status"`
	// Interfaces the path uses, as nw_path_enumerate_interfaces lists
	// them (the preferred first).
	Interfaces []Interface `json:"interfaces"`
	// Local and Remote are the effective endpoints (invalid when the
	// framework gives none).
	Local  netip.AddrPort `json:"local"`
	Remote netip.AddrPort `json:"remote"`
}

// Report is what nw_establishment_report_t says about how the connection
// was established.
type Report struct {
	// Duration from start to ready.
	DurationMillis uint64 `json:"duration_ms"`
	// AttemptStartedAfterMillis: from start to the attempt that succeeded.
	AttemptStartedAfterMillis uint64 `json:"attempt_started_after_ms"`
	PreviousAttempts          uint32 `json:"previous_attempts"`
	UsedProxy                 bool   `json:"used_proxy"`
	// Protocols with their handshake time and RTT, outermost last (here:
	// tcp; TLS is Go's, above the stream).
	Protocols []ProtocolHandshake `json:"protocols"`
}

// ProtocolHandshake is one protocol of an establishment report.
type ProtocolHandshake struct {
	Name      string `json:"name"`
	Millis    uint64 `json:"handshake_ms"`
	RTTMillis uint64 `json:"handshake_rtt_ms"`
}

// Error domains of nw_error_domain_t.
const (
	DomainInvalid = 0
	DomainPOSIX   = 1
	DomainDNS     = 2
	DomainTLS     = 3
)

// Error is an nw_error_t, read out. A POSIX error unwraps to its
// syscall.Errno, so errors.Is(err, syscall.ECONNREFUSED) holds.
type Error struct {
	Domain int
	Code   int
}

func (e *Error) Error() string {
	switch e.Domain {
	case DomainPOSIX:
		return "network framework: " + syscall.Errno(e.Code).Error()
	case DomainDNS:
		return fmt.Sprintf("network framework: DNS error %d", e.Code)
	case DomainTLS:
		return fmt.Sprintf("network framework: TLS error %d", e.Code)
	}
	return fmt.Sprintf("network framework: error %d (domain %d)", e.Code, e.Domain)
}

// Unwrap gives the errno of a POSIX error.
func (e *Error) Unwrap() error {
	if e.Domain == DomainPOSIX && e.Code > 0 {
		return syscall.Errno(e.Code)
	}
	return nil
}

// Timeout says whether the framework gave up waiting (ETIMEDOUT).
func (e *Error) Timeout() bool {
	return e.Domain == DomainPOSIX && syscall.Errno(e.Code) == syscall.ETIMEDOUT
}

// Params are the nw_parameters of a connection, as the adapter sets them.
type Params struct {
	Service Service
	// Interface, when not 0, is required (nw_parameters_require_interface).
	Interface Object
	// Prohibit are interface types the connection must not use.
	Prohibit []InterfaceType
}

// API is the part of Network.framework (and libdispatch) the adapter uses.
//
// Callbacks arrive on the connection's serial queue, one at a time and in
// the framework's order: the state handler sees preparing, then ready,
// waiting or failed, and cancelled last after Cancel (nothing is called
// after cancelled); every Send and Receive completion is called exactly
// once, with an error when the connection is cancelled or failed.
// Callbacks must not block.
type API interface {
	// NewEndpoint is nw_endpoint_create_host(host, port).
	NewEndpoint(host, port string) (Object, error)
	// NewParameters is nw_parameters_create_secure_tcp without TLS, with
	// p applied (the multipath service, the required interface, the
	// prohibited interface types).
	NewParameters(p Params) (Object, error)
	// FindInterface returns the nw_interface_t named name, as the
	// framework's current path lists it.
	FindInterface(name string) (Object, error)
	// NewConnection is nw_connection_create (it retains ep and params).
	NewConnection(ep, params Object) (Object, error)
	// SetStateHandler is nw_connection_set_state_changed_handler; err is
	// nil when the framework gave none.
	SetStateHandler(c Object, fn func(s State, err *Error))
	// Start gives the connection its own serial queue and starts it.
	Start(c Object)
	// Send queues data (copied before Send returns); final sends the end
	// of the stream after it (a FIN). done is called once.
	Send(c Object, data []byte, final bool, done func(err *Error))
	// Receive asks for 1 to max bytes; fn gets them (a copy), eof when the
	// peer ended the stream, and an error. fn is called once.
	Receive(c Object, max int, fn func(data []byte, eof bool, err *Error))
	// Cancel is nw_connection_cancel: graceful, ends in StateCancelled.
	Cancel(c Object)
	// CopyCurrentPath is nw_connection_copy_current_path (0: none yet).
	CopyCurrentPath(c Object) Object
	// ReadPath reads a path's status, interfaces and effective endpoints.
	ReadPath(path Object) PathInfo
	// EstablishmentReport is nw_connection_access_establishment_report;
	// fn gets nil when there is none. fn is called once.
	EstablishmentReport(c Object, fn func(*Report))
	// Release gives back one reference (nw_release).
	Release(o Object)
}

// ErrUnsupported: Network.framework is only on macOS.
var ErrUnsupported = errors.New("only macOS has Network.framework")
