package patterns

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/patterns/wire"
)

// Status classifies how a test ended; the vocabulary is transport.Status,
// so that each transport can say what its own errors mean.
type Status = transport.Status

const (
	StatusSuccess           = transport.StatusSuccess
	StatusConnectionRefused = transport.StatusConnectionRefused
	StatusConnectionTimeout = transport.StatusConnectionTimeout
	StatusConnectionReset   = transport.StatusConnectionReset
	StatusConnectionClosed  = transport.StatusConnectionClosed
	StatusUnreachable       = transport.StatusUnreachable
	StatusTimeout           = transport.StatusTimeout
	StatusTLSError          = transport.StatusTLSError
	StatusPinMismatch       = transport.StatusPinMismatch
	StatusServerRefused     = transport.StatusServerRefused
	StatusProtocolError     = transport.StatusProtocolError
	StatusNetworkChanged    = transport.StatusNetworkChanged
	StatusCancelled         = transport.StatusCancelled
	StatusUnsupported       = transport.StatusUnsupported
	StatusNoSourceAddr      = transport.StatusNoSourceAddr
	StatusDNSError          = transport.StatusDNSError
	StatusUnknownError      = transport.StatusUnknownError
	StatusTargetRefused     = transport.StatusTargetRefused
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
// cause says whether we stopped the test ourselves. What the patterns
// understand (their frames, HTTP statuses, early ends) is decided here;
// everything a transport returned already carries its status.
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
	var (
		ef *wire.ErrorFrame
		se *HTTPStatusError
	)
	switch {
	case errors.Is(err, ErrServerUnresolved):
		return StatusDNSError
	case errors.Is(err, ErrNetworkChanged):
		return StatusNetworkChanged
	case errors.As(err, &ef), errors.Is(err, ErrTooLarge):
		return StatusServerRefused
	case errors.As(err, &se):
		if se.Code == 413 || se.Code == 429 || se.Code == 503 {
			return StatusServerRefused
		}
		return StatusProtocolError
	case errors.Is(err, ErrProtocol), errors.Is(err, wire.ErrMalformed):
		return StatusProtocolError
	case errors.Is(err, ErrStalled):
		return StatusTimeout
	}
	if st, ok := transport.StatusOf(err); ok {
		return st
	}
	switch {
	case errors.Is(err, ErrServerClosed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return StatusConnectionClosed
	case errors.Is(err, context.DeadlineExceeded):
		return StatusTimeout
	case errors.Is(err, context.Canceled):
		return StatusCancelled
	}
	return StatusUnknownError
}
