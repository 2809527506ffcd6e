package rawprobe

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
)

// AnswerKind says what, if anything, answered one probe.
type AnswerKind string

const (
	AnswerNone      AnswerKind = ""        // no answer before the timeout
	AnswerSynAck    AnswerKind = "syn-ack" // tcp-syn: port open
	AnswerRST       AnswerKind = "rst"     // tcp-syn / tcp-connect: port closed, host up
	AnswerConnect   AnswerKind = "connect" // tcp-connect: handshake completed
	AnswerEchoReply AnswerKind = "echo-reply"
)

// ProbeStatus classifies the outcome of one probe (zgrab2 status.go style):
// one word for a report, derived from the answer or the error.
type ProbeStatus string

const (
	ProbeSuccess     ProbeStatus = "success"
	ProbeTimeout     ProbeStatus = "timeout"
	ProbeUnreachable ProbeStatus = "unreachable"
	ProbeCancelled   ProbeStatus = "cancelled"
	ProbeError       ProbeStatus = "error"
)

// classifyErr maps an error of a probe to its status.
func classifyErr(err error) ProbeStatus {
	switch {
	case err == nil:
		return ProbeSuccess
	case errors.Is(err, context.Canceled):
		return ProbeCancelled
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return ProbeTimeout
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return ProbeUnreachable
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ProbeTimeout
	}
	return ProbeError
}
