package survey

import (
	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/survey/internal/rawprobe"
)

// DNS statuses, named as zdns names them (defined by package probe, whose
// resolver produces them).
const (
	StatusNoError  = probe.DNSNoError
	StatusNXDomain = probe.DNSNXDomain
	StatusServFail = probe.DNSServFail
	StatusRefused  = probe.DNSRefused
	StatusTimeout  = probe.DNSTimeout
	StatusNoAnswer = probe.DNSNoAnswer
	StatusError    = probe.DNSError // any other rcode or a local failure
)

// What answered a probe and how it ended, as the records say it (the
// probing engine's words).
type (
	AnswerKind  = rawprobe.AnswerKind
	ProbeStatus = rawprobe.ProbeStatus
)

const (
	AnswerNone      = rawprobe.AnswerNone
	AnswerSynAck    = rawprobe.AnswerSynAck
	AnswerRST       = rawprobe.AnswerRST
	AnswerConnect   = rawprobe.AnswerConnect
	AnswerEchoReply = rawprobe.AnswerEchoReply

	ProbeSuccess     = rawprobe.ProbeSuccess
	ProbeTimeout     = rawprobe.ProbeTimeout
	ProbeUnreachable = rawprobe.ProbeUnreachable
	ProbeCancelled   = rawprobe.ProbeCancelled
	ProbeError       = rawprobe.ProbeError
)
