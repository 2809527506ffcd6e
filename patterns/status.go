package patterns

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/quic-go/quic-go"

	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/patterns/wire"
	"github.com/mptester/mptester/probe"
)

// Status classifies how a test ended, in the spirit of zgrab2's status
// enum: a fixed vocabulary that analyses can group by.
type Status string

const (
	StatusSuccess           Status = "success"
	StatusConnectionRefused Status = "connection-refused"
	StatusConnectionTimeout Status = "connection-timeout"
	StatusConnectionReset   Status = "connection-reset"  // RST, QUIC stateless reset, abrupt close
	StatusConnectionClosed  Status = "connection-closed" // the server closed before the pattern finished
	StatusUnreachable       Status = "unreachable"
	StatusTimeout           Status = "io-timeout" // the per-test timeout or a read deadline expired
	StatusTLSError          Status = "tls-error"
	StatusPinMismatch       Status = "pin-mismatch"
	StatusServerRefused     Status = "server-refused" // the server's limits said no
	StatusProtocolError     Status = "protocol-error"
	StatusNetworkChanged    Status = "network-changed"
	StatusCancelled         Status = "cancelled"
	StatusUnsupported       Status = "unsupported"
	StatusNoSourceAddr      Status = "no-source-address"
	StatusDNSError          Status = "dns-error" // the server's name did not resolve on the test's path
	StatusUnknownError      Status = "unknown-error"
)

var (
	// ErrProtocol: the server's answer does not follow the pattern.
	ErrProtocol = errors.New("protocol error")
	// ErrServerClosed: the stream ended before the pattern was complete.
	ErrServerClosed = errors.New("server closed the stream early")
	// ErrServerUnresolved: the server's name did not resolve on a path.
	ErrServerUnresolved = errors.New("server name not resolved")
	// ErrNetworkChanged is the cancellation cause when stable mode sees a
	// path appear, disappear or change address (000 §II-A).
	ErrNetworkChanged = errors.New("network changed during test")
)

// Classify maps an error to a Status. ctx is the test's context: its
// cause says whether we stopped the test ourselves.
func Classify(ctx context.Context, err error) Status {
	if err == nil {
		return StatusSuccess
	}
	if ctx != nil {
		if cause := context.Cause(ctx); cause != nil {
			switch {
			case errors.Is(cause, ErrNetworkChanged):
				return StatusNetworkChanged
			case errors.Is(cause, context.DeadlineExceeded):
				return StatusTimeout
			case errors.Is(cause, context.Canceled):
				return StatusCancelled
			}
		}
	}
	if errors.Is(err, ErrServerUnresolved) {
		return StatusDNSError
	}
	var (
		ef      *wire.ErrorFrame
		se      *HTTPStatusError
		appErr  *quic.ApplicationError
		idleErr *quic.IdleTimeoutError
		hsErr   *quic.HandshakeTimeoutError
		trErr   *quic.TransportError
		reset   *quic.StatelessResetError
		certErr *tls.CertificateVerificationError
		unkAuth x509.UnknownAuthorityError
		hostErr x509.HostnameError
		alert   tls.AlertError
		recHdr  tls.RecordHeaderError
		netErr  net.Error
		strErr  *quic.StreamError
	)
	switch {
	case errors.Is(err, ErrNetworkChanged):
		return StatusNetworkChanged
	case errors.Is(err, transport.ErrPinMismatch):
		return StatusPinMismatch
	case errors.Is(err, probe.ErrUnsupported):
		return StatusUnsupported
	case errors.Is(err, probe.ErrNoSourceAddr):
		return StatusNoSourceAddr
	case errors.As(err, &ef), errors.Is(err, ErrTooLarge):
		return StatusServerRefused
	case errors.As(err, &se):
		if se.Code == 413 || se.Code == 429 || se.Code == 503 {
			return StatusServerRefused
		}
		return StatusProtocolError
	case errors.Is(err, ErrProtocol), errors.Is(err, wire.ErrMalformed):
		return StatusProtocolError
	case errors.Is(err, syscall.ECONNREFUSED):
		return StatusConnectionRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.As(err, &reset):
		return StatusConnectionReset
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.EADDRNOTAVAIL):
		return StatusUnreachable
	case errors.As(err, &hsErr):
		return StatusConnectionTimeout
	case errors.As(err, &idleErr), errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		if strings.Contains(err.Error(), "handshake") || strings.Contains(err.Error(), "connect") {
			return StatusConnectionTimeout
		}
		return StatusTimeout
	case errors.As(err, &certErr), errors.As(err, &unkAuth), errors.As(err, &hostErr), errors.As(err, &alert), errors.As(err, &recHdr):
		return StatusTLSError
	case errors.As(err, &trErr):
		if trErr.ErrorCode.IsCryptoError() {
			return StatusTLSError
		}
		return StatusConnectionReset
	case errors.As(err, &appErr), errors.As(err, &strErr):
		if appErr != nil && appErr.ErrorCode == quic.ApplicationErrorCode(wire.CodeBusy) {
			return StatusServerRefused
		}
		return StatusConnectionClosed
	case errors.Is(err, ErrServerClosed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return StatusConnectionClosed
	case errors.Is(err, context.Canceled):
		return StatusCancelled
	case errors.As(err, &netErr) && netErr.Timeout():
		return StatusTimeout
	case strings.Contains(err.Error(), "tls:"):
		return StatusTLSError
	}
	return StatusUnknownError
}
