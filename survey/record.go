package survey

import "net/netip"

// ProbeRecord is one "probe" line: Count probes of one address from one
// path. An address resolved on several paths is probed once per probe path
// and lists every resolution path (cell) it belongs to.
type ProbeRecord struct {
	Type         string     `json:"type"` // "probe"
	ProbePath    string     `json:"probe_path"`
	ResolvePath  string     `json:"resolve_path"` // first of ResolvePaths
	ResolvePaths []string   `json:"resolve_paths"`
	Address      netip.Addr `json:"address"`
	Port         int        `json:"port,omitempty"`
	Domains      []string   `json:"domains"`
	Method       string     `json:"method"`
	// Route is RouteViaNAT64 when the IPv4 Address was probed through the
	// probe path's NAT64 at Dest, the address synthesized under
	// NAT64Prefix; "" when probed directly.
	Route       string         `json:"route,omitempty"`
	Dest        netip.Addr     `json:"dest,omitzero"`
	NAT64Prefix netip.Prefix   `json:"nat64_prefix,omitzero"`
	Sent        int            `json:"sent"`
	Received    int            `json:"received"`
	RTTsMs      []float64      `json:"rtts_ms"`
	ProbeStats                 // min, median, mean, max, stddev of RTTsMs
	Answer      AnswerKind     `json:"answer"` // kind of the first answer ("" = none)
	Answers     map[string]int `json:"answer_counts,omitempty"`
	Errors      map[string]int `json:"errors,omitempty"` // probe statuses other than success/timeout
	Responsive  bool           `json:"responsive"`
	Bytes       int64          `json:"bytes"`
	Valid       bool           `json:"valid"`
	// HostOverloaded: no probe was answered, but this host may have lost
	// or been too late for the answers (Summary.Degraded says how), also
	// when probed again: the target is neither responsive nor counted
	// unresponsive.
	HostOverloaded bool `json:"host_overloaded,omitempty"`
	Reprobed       int  `json:"reprobed,omitempty"` // times probed again because of host overload
}

// RouteViaNAT64 is ProbeRecord.Route of a target probed through a NAT64.
const RouteViaNAT64 = "via-nat64"

// answered reports whether any probe was answered.
func (r *ProbeRecord) answered() bool { return r.Received > 0 }
