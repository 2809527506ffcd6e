package wire

import "fmt"

// TransportErrorCode is a QUIC transport error code (RFC 9000 §20.1).
type TransportErrorCode uint64

// The RFC 9000 §20.1 codes this layer raises or a connection needs.
const (
	NoError                 TransportErrorCode = 0x00
	InternalError           TransportErrorCode = 0x01
	ConnectionRefused       TransportErrorCode = 0x02
	FlowControlError        TransportErrorCode = 0x03
	StreamLimitError        TransportErrorCode = 0x04
	StreamStateError        TransportErrorCode = 0x05
	FinalSizeError          TransportErrorCode = 0x06
	FrameEncodingError      TransportErrorCode = 0x07
	TransportParameterError TransportErrorCode = 0x08
	ConnectionIDLimitError  TransportErrorCode = 0x09
	ProtocolViolation       TransportErrorCode = 0x0a
	InvalidToken            TransportErrorCode = 0x0b
	ApplicationError        TransportErrorCode = 0x0c
	CryptoBufferExceeded    TransportErrorCode = 0x0d
	KeyUpdateError          TransportErrorCode = 0x0e
	AEADLimitReached        TransportErrorCode = 0x0f
	NoViablePath            TransportErrorCode = 0x10
	VersionNegotiationError TransportErrorCode = 0x11 // RFC 9368
)

// Path abandon reasons of draft-ietf-quic-multipath-21 §"Error Codes".
const (
	ApplicationAbandonPath   TransportErrorCode = 0x3e
	PathResourceLimitReached TransportErrorCode = 0x3e75
	PathUnstableOrPoor       TransportErrorCode = 0x3e76
	NoCIDAvailableForPath    TransportErrorCode = 0x3e77
)

var codeNames = map[TransportErrorCode]string{
	NoError: "NO_ERROR", InternalError: "INTERNAL_ERROR", ConnectionRefused: "CONNECTION_REFUSED",
	FlowControlError: "FLOW_CONTROL_ERROR", StreamLimitError: "STREAM_LIMIT_ERROR",
	StreamStateError: "STREAM_STATE_ERROR", FinalSizeError: "FINAL_SIZE_ERROR",
	FrameEncodingError: "FRAME_ENCODING_ERROR", TransportParameterError: "TRANSPORT_PARAMETER_ERROR",
	ConnectionIDLimitError: "CONNECTION_ID_LIMIT_ERROR", ProtocolViolation: "PROTOCOL_VIOLATION",
	InvalidToken: "INVALID_TOKEN", ApplicationError: "APPLICATION_ERROR",
	CryptoBufferExceeded: "CRYPTO_BUFFER_EXCEEDED", KeyUpdateError: "KEY_UPDATE_ERROR",
	AEADLimitReached: "AEAD_LIMIT_REACHED", NoViablePath: "NO_VIABLE_PATH",
	VersionNegotiationError: "VERSION_NEGOTIATION_ERROR",
}

func (c TransportErrorCode) String() string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	if c >= 0x100 && c <= 0x1ff {
		return fmt.Sprintf("CRYPTO_ERROR(0x%x)", uint64(c-0x100))
	}
	return fmt.Sprintf("0x%x", uint64(c))
}

// TransportError is a connection error as RFC 9000 §11 defines it: the code
// and the frame type are what the CONNECTION_CLOSE frame (type 0x1c) must
// carry, so the error is built where it is understood and sent as is.
type TransportError struct {
	Code      TransportErrorCode
	FrameType FrameType // the frame that triggered it; 0 when none
	Reason    string
	cause     error // the local failure behind it (a TLS error), if any
}

// Unwrap is the local failure the error was built from (a crypto/tls
// error with its own chain, such as a certificate check), nil if none.
func (e *TransportError) Unwrap() error { return e.cause }

func (e *TransportError) Error() string {
	if e.FrameType != 0 {
		return fmt.Sprintf("%s in frame 0x%x: %s", e.Code, uint64(e.FrameType), e.Reason)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Reason)
}

// Is makes errors.Is(err, &TransportError{Code: X}) match on the code alone.
func (e *TransportError) Is(target error) bool {
	t, ok := target.(*TransportError)
	return ok && t.Code == e.Code
}

func transportErr(code TransportErrorCode, ft FrameType, format string, args ...any) *TransportError {
	return &TransportError{Code: code, FrameType: ft, Reason: fmt.Sprintf(format, args...)}
}

// NewError is a *TransportError with the code and frame type a
// CONNECTION_CLOSE must carry.
func NewError(code TransportErrorCode, ft FrameType, format string, args ...any) *TransportError {
	return transportErr(code, ft, format, args...)
}

// SetCause records the local failure behind e (a crypto/tls error), which
// e.Unwrap returns.
func SetCause(e *TransportError, cause error) { e.cause = cause }
