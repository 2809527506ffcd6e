// Package transport is the one interface every traffic pattern uses to reach
// a test server: tcp, mptcp and quic, each over one chosen path (every
// client socket is bound through package probe). A later multipath QUIC or
// handover-mode transport is one more implementation of Transport.
package transport

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/mptester/mptester/patterns/wire"
	"github.com/mptester/mptester/probe"
)

// Names of the transports.
const (
	TCP   = "tcp"
	MPTCP = "mptcp"
	QUIC  = "quic"
)

// UnsentLimit is the most data a TCP sender keeps queued unsent (see
// LimitUnsent): enough to keep a 1 Gbit/s, 1 ms path busy.
const UnsentLimit = 128 << 10

// Names lists every transport, in the order of the matrix.
var Names = []string{TCP, MPTCP, QUIC}

// ALPN families: FamilyHTTP maps to h2/http1.1 over TCP and h3 over QUIC;
// stream patterns carry their own ALPN on both.
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

// Transport dials connections over one path.
type Transport interface {
	Name() string
	// Dial connects to addr (an IP literal and port) for the ALPN family.
	Dial(ctx context.Context, addr netip.AddrPort, family string) (Conn, error)
}

// Info is what a connection is, once established.
type Info struct {
	Transport string        `json:"transport"`
	Local     string        `json:"local"`
	Remote    string        `json:"remote"`
	ALPN      string        `json:"alpn"`
	Setup     time.Duration `json:"setup_ns"` // connect + TLS handshake
	// MPTCP is set for the mptcp transport: whether the server spoke MPTCP
	// (the kernel silently falls back to TCP otherwise).
	MPTCP *MPTCPStatus `json:"mptcp,omitempty"`
}

// MPTCPStatus of one connection.
type MPTCPStatus struct {
	Negotiated bool `json:"negotiated"`
}

// Options shared by every transport.
type Options struct {
	Path   probe.Path
	Family probe.Family
	// TLS is the client configuration (ServerName, pin); NextProtos is set
	// per dial.
	TLS *tls.Config
	// HTTP1 forces HTTP/1.1 instead of offering h2 over TCP.
	HTTP1 bool
	// IdleTimeout bounds silence on a QUIC connection.
	IdleTimeout time.Duration
}

// New returns the transport named name.
func New(name string, o Options) (Transport, error) {
	if o.TLS == nil {
		return nil, errors.New("transport: no TLS configuration")
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = 30 * time.Second
	}
	switch name {
	case TCP:
		return &tcpTransport{o: o}, nil
	case MPTCP:
		return &tcpTransport{o: o, mptcp: true}, nil
	case QUIC:
		return &quicTransport{o: o}, nil
	}
	return nil, fmt.Errorf("unknown transport %q (want %s)", name, strings.Join(Names, ", "))
}

// alpns returns what a client offers for a family over TCP or QUIC.
func alpns(family string, quic, http1 bool) []string {
	if family != FamilyHTTP {
		return []string{family}
	}
	switch {
	case quic:
		return []string{wire.ALPNHTTP3}
	case http1:
		return []string{wire.ALPNHTTP1}
	}
	return []string{wire.ALPNHTTP2, wire.ALPNHTTP1}
}

// ClientTLS builds the client TLS configuration: a pinned SHA-256 leaf
// certificate fingerprint, no verification (insecure), or the system roots.
func ClientTLS(serverName, pin string, insecure bool) (*tls.Config, error) {
	cfg := &tls.Config{ServerName: serverName, MinVersion: tls.VersionTLS12}
	switch {
	case pin != "":
		want, err := ParseFingerprint(pin)
		if err != nil {
			return nil, err
		}
		// The pin replaces chain verification: the server's certificate is
		// usually self-signed and the pin is the trust anchor.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("server sent no certificate")
			}
			if got := sha256.Sum256(cs.PeerCertificates[0].Raw); got != want {
				return fmt.Errorf("%w: server certificate %s does not match pin", ErrPinMismatch, hex.EncodeToString(got[:]))
			}
			return nil
		}
	case insecure:
		cfg.InsecureSkipVerify = true
	}
	return cfg, nil
}

// ErrPinMismatch: the server's certificate is not the pinned one.
var ErrPinMismatch = errors.New("certificate pin mismatch")

// Fingerprint is the SHA-256 of a certificate, as hex with colons.
func Fingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = fmt.Sprintf("%02X", b)
	}
	return strings.Join(parts, ":")
}

// ParseFingerprint accepts 64 hex digits, with or without colons, any case.
func ParseFingerprint(s string) ([32]byte, error) {
	var out [32]byte
	h := strings.ReplaceAll(strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "sha256:"), ":", "")
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != 32 {
		return out, fmt.Errorf("invalid SHA-256 pin %q (want 64 hex digits)", s)
	}
	copy(out[:], b)
	return out, nil
}
