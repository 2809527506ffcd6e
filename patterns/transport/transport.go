// Package transport is the one interface every traffic pattern uses to reach
// a test server, and the registry of the transports behind it. A transport
// is one file that registers a Descriptor in init: how it dials (over one
// path or several), how it listens, what its samples are and what its
// errors mean. Names, the run matrix, serve's listeners, flag help texts
// and the smoke check are derived from the registry; nothing outside a
// transport's file names it.
package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"time"

	"github.com/mptester/mptester/mpquic"
	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/probe/nw"
)

// UnsentLimit is the most data a TCP sender keeps queued unsent (see
// LimitUnsent): enough to keep a 1 Gbit/s, 1 ms path busy.
const UnsentLimit = 128 << 10

// ALPN families: FamilyHTTP is mapped by each transport to its HTTP ALPNs
// (h2/http1.1 over TCP, h3 over QUIC); any other family is a stream
// pattern's own ALPN, offered as is.
const FamilyHTTP = "http"

// Stream is one bidirectional byte stream: a TLS connection over TCP, a
// QUIC stream over QUIC.
type Stream interface {
	io.ReadWriter
	// CloseWrite ends the sending direction (TLS close_notify + FIN, QUIC FIN).
	CloseWrite() error
	// Close aborts both directions.
	Close() error
	SetDeadline(t time.Time) error
}

// Conn is one transport connection to the server.
type Conn interface {
	// OpenStream returns a stream. Over TCP the connection is the stream and
	// can be opened once; over QUIC every call opens a new stream.
	OpenStream(ctx context.Context) (Stream, error)
	// MultiStream says whether OpenStream can be called again (QUIC).
	MultiStream() bool
	// RoundTripper carries HTTP on this one connection only (FamilyHTTP).
	RoundTripper() http.RoundTripper
	// Info describes the connection as established.
	Info() Info
	// Sample reads the protocol state now (TCP_INFO, MPTCP_INFO, QUIC stats).
	Sample() State
	Close() error
}

// Transport dials connections over the paths of its Options.
type Transport interface {
	Name() string
	// Dial connects to addr (an IP literal and port) for the ALPN family.
	Dial(ctx context.Context, addr netip.AddrPort, family string) (Conn, error)
}

// Info is what a connection is, once established.
type Info struct {
	Transport string `json:"transport"`
	Local     string `json:"local"`
	Remote    string `json:"remote"`
	ALPN      string `json:"alpn"`
	// QUICVersion is a QUIC connection's version once established: v1,
	// or v2 (RFC 9369) when the server moved it there (mpquic offers v2
	// by compatible version negotiation, RFC 9368).
	QUICVersion string        `json:"quic_version,omitempty"`
	Setup       time.Duration `json:"setup_ns"` // connect + TLS handshake
	// Facts the transport knows about this connection (MPTCP: whether the
	// server spoke it), written under Facts.Key().
	Facts Fact `json:"-"`
}

// quicVersionName names a QUIC version as results record it.
func quicVersionName(v uint32) string {
	switch v {
	case mpquic.Version1:
		return "v1"
	case mpquic.Version2:
		return "v2"
	}
	return fmt.Sprintf("0x%08x", v)
}

// Fact is transport-specific data of a record, serialised under its own
// key next to the generic fields.
type Fact interface{ Key() string }

// Degraded is implemented by a summary Fact that can say the transport was
// not really used (MPTCP fell back to TCP): the smoke check fails on it.
type Degraded interface{ Degraded() string }

// Role of a path for a multipath transport.
type Role string

const (
	RolePrimary   Role = "primary"   // the first subflow / the path a single-path transport uses
	RoleBackup    Role = "backup"    // used only when the others fail (MPTCP backup flag)
	RoleAvailable Role = "available" // may carry traffic alongside the primary
)

// PathRole is one selected path and what it is for.
type PathRole struct {
	probe.Path
	Role Role
}

// Options shared by every transport.
type Options struct {
	// Paths are every selected path, primary first. A single-path
	// transport uses Paths[0]; a multipath one may use them all.
	Paths  []PathRole
	Family probe.Family
	// TLS is the client configuration (ServerName, pin); NextProtos is set
	// per dial.
	TLS *tls.Config
	// HTTP1 forces HTTP/1.1 instead of offering h2 over TCP.
	HTTP1 bool
	// IdleTimeout bounds silence on a QUIC connection.
	IdleTimeout time.Duration
	// Handover tunes when quic-handover leaves its primary path (zero
	// fields: the defaults of 000 §II-B).
	Handover HandoverConfig
	// QlogDir, when set, receives a qlog trace per QUIC connection
	// (quic, quic-handover, mpquic; qlog.go).
	QlogDir string
	// MPTCPService is the multipath service of MPTCP on macOS (0: the
	// default, interactive); Linux's kernel MPTCP has no such setting.
	MPTCPService nw.Service
	// MPQUICCongestion is mpquic's congestion control (mpquic.Config's
	// Congestion; empty: CUBIC).
	MPQUICCongestion mpquic.CongestionControl
	// QUICECN records quic-go's ECN validation and CE counts on every quic
	// connection (QUICECN in its samples). quic-go reports them only as
	// qlog events, and a tracer makes it build an event for every packet:
	// 5% more CPU per byte, 13% less upload goodput at 5 Gbit/s on
	// loopback (docs/benchmarks.md), so it is asked for. A --qlog trace
	// records them anyway.
	QUICECN bool
}

// Primary is the path a connection starts on.
func (o Options) Primary() probe.Path {
	if len(o.Paths) == 0 {
		return probe.Path{}
	}
	return o.Paths[0].Path
}

// Single returns options for one path as primary.
func Single(p probe.Path, f probe.Family, tlsCfg *tls.Config) Options {
	return Options{Paths: []PathRole{{Path: p, Role: RolePrimary}}, Family: f, TLS: tlsCfg}
}

// New returns the transport named name.
func New(name string, o Options) (Transport, error) {
	d, err := Get(name)
	if err != nil {
		return nil, err
	}
	if o.TLS == nil {
		return nil, errors.New("transport: no TLS configuration")
	}
	if len(o.Paths) == 0 {
		return nil, errors.New("transport: no path")
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = 30 * time.Second
	}
	return d.New(o)
}

// offered returns the ALPNs a client offers for a family: the transport's
// HTTP ALPNs for FamilyHTTP, else the stream pattern's own.
func offered(family string, http []string) []string {
	if family == FamilyHTTP {
		return http
	}
	return []string{family}
}
