package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/mptester/mptester/internal/certs"
	"github.com/mptester/mptester/probe"
)

// Status classifies how a test ended, in the spirit of zgrab2's status
// enum: a fixed vocabulary that analyses can group by. Transports say the
// status of their own errors (Error); package patterns adds the ones only
// it understands.
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

// StatusTargetRefused: the run's target policy (--no-private) refused the
// server's address on this path, at the dial; nothing was sent to it.
const StatusTargetRefused Status = "target-refused"

// Error is an error of a transport that already says what it means.
type Error struct {
	Status Status
	Op     string // "connect", "tls handshake", "quic handshake", "read", ...
	Err    error
}

func (e *Error) Error() string {
	if e.Op == "" {
		return e.Err.Error()
	}
	return e.Op + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// StatusOf returns the status a transport gave err, ok false when no
// transport classified it.
func StatusOf(err error) (Status, bool) {
	var te *Error
	if errors.As(err, &te) {
		return te.Status, true
	}
	return "", false
}

// wrap classifies err for op with the transport's own classifier first and
// the common one after; nil, io.EOF and already classified errors pass
// unchanged (callers compare with io.EOF).
func wrap(op string, err error, own func(error) Status) error {
	if err == nil || err == io.EOF {
		return err
	}
	if _, ok := StatusOf(err); ok {
		return err
	}
	st := Status("")
	handshake := op == opHandshake || op == opQUICHandshake
	switch {
	case errors.Is(err, certs.ErrPinMismatch):
		// Whatever alert or transport error carries it.
		st = StatusPinMismatch
	case own != nil:
		st = own(err)
	}
	if st == "" {
		st = common(err, op == opConnect || handshake)
		if st == StatusUnknownError && handshake {
			// A handshake that fails in a way no type names (a remote
			// alert arrives as an unexported crypto/tls type) is TLS's.
			st = StatusTLSError
		}
	}
	return &Error{Status: st, Op: op, Err: err}
}

const (
	opConnect       = "connect"
	opHandshake     = "tls handshake"
	opQUICHandshake = "quic handshake"
)

// common classifies what every socket transport can return: errno values,
// deadlines, crypto/tls and x509 failures. setup says the error happened
// while connecting, where a timeout is a connection timeout.
func common(err error, setup bool) Status {
	var (
		certErr *tls.CertificateVerificationError
		unkAuth x509.UnknownAuthorityError
		hostErr x509.HostnameError
		alert   tls.AlertError
		recHdr  tls.RecordHeaderError
		netErr  net.Error
	)
	switch {
	case errors.Is(err, certs.ErrPinMismatch):
		return StatusPinMismatch
	case errors.Is(err, probe.ErrTargetRefused):
		return StatusTargetRefused
	case errors.Is(err, probe.ErrUnsupported), errors.Is(err, syscall.EPROTONOSUPPORT), errors.Is(err, syscall.ENOPROTOOPT):
		return StatusUnsupported
	case errors.Is(err, probe.ErrNoSourceAddr):
		return StatusNoSourceAddr
	case errors.Is(err, syscall.ECONNREFUSED):
		return StatusConnectionRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return StatusConnectionReset
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.EADDRNOTAVAIL):
		return StatusUnreachable
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		if setup {
			return StatusConnectionTimeout
		}
		return StatusTimeout
	case errors.As(err, &certErr), errors.As(err, &unkAuth), errors.As(err, &hostErr), errors.As(err, &alert), errors.As(err, &recHdr):
		return StatusTLSError
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		if setup {
			return StatusConnectionReset
		}
		return StatusConnectionClosed
	case errors.Is(err, context.Canceled):
		return StatusCancelled
	}
	if setup && errors.Is(err, io.EOF) {
		return StatusConnectionReset
	}
	return StatusUnknownError
}

// Errorf builds a classified error (for transports outside this package
// and for tests).
func Errorf(st Status, op, format string, a ...any) error {
	return &Error{Status: st, Op: op, Err: fmt.Errorf(format, a...)}
}
