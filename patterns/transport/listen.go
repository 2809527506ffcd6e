package transport

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/mptester/mptester/mpquic"
)

// ListenOptions of a transport's server side.
type ListenOptions struct {
	// Addr is host:port to bind when Socket is nil.
	Addr string
	// Socket is a socket opened elsewhere (a lab namespace): a net.Listener
	// for a "tcp" transport, a net.PacketConn for a "udp" one. The
	// listener closes it.
	Socket any
	// Certificate served to every client.
	Certificate tls.Certificate
	// StreamALPNs are the stream patterns' ALPNs, offered next to the
	// transport's own HTTP ALPNs.
	StreamALPNs []string
	// HTTP serves the HTTP patterns.
	HTTP http.Handler
	// Serves lists the transports this listener serves: its own name and
	// those whose ServedBy names it (the tcp listener accepts MPTCP only
	// when mptcp is served).
	Serves []string
	// ReadTimeout bounds waiting for a request; IdleTimeout the life of an
	// idle connection.
	ReadTimeout, IdleTimeout time.Duration
	Logger                   *slog.Logger
	// QlogDir, when set, receives a qlog trace per QUIC connection
	// (quic, mpquic; qlog.go).
	QlogDir string
	// MPQUICRetry has the mpquic listener validate every client's address
	// with a Retry (RFC 9000 §8.1.2); without it it does so by itself
	// only under a flood of handshakes.
	MPQUICRetry bool
	// MPQUICCongestion is mpquic's congestion control (empty: CUBIC).
	MPQUICCongestion mpquic.CongestionControl
}

// Listener is a transport's server side.
type Listener interface {
	Addr() net.Addr
	// Accept returns the next connection, before its TLS handshake (so
	// the server can apply its limits first).
	Accept(ctx context.Context) (ServerConn, error)
	// Describe is serve's one-line summary of the listener.
	Describe() string
	// Shutdown stops accepting and lets HTTP sessions end until ctx ends.
	Shutdown(ctx context.Context) error
	// Close stops everything at once.
	Close() error
}

// ServerConn is one accepted connection.
type ServerConn interface {
	RemoteAddr() net.Addr
	// Refuse turns the client away (server limits), before the handshake
	// or, for an HTTP client, after it; the client's transport reports
	// StatusServerRefused where its protocol can carry the reason.
	Refuse(reason string)
	// Handshake completes TLS; http says the client chose an HTTP ALPN.
	Handshake(ctx context.Context) (alpn string, http bool, err error)
	// ServeHTTP serves HTTP on the connection until it ends.
	ServeHTTP()
	// AcceptStream returns the next stream of a stream ALPN (over TCP the
	// connection itself, once; then io.EOF).
	AcceptStream(ctx context.Context) (Stream, error)
	// Sample reads the server side's protocol state.
	Sample() State
	// Abort closes the connection at once, telling the peer a code and
	// reason where the protocol can (QUIC CONNECTION_CLOSE).
	Abort(code uint64, reason string)
	Close() error
}
