package survey

import "net/netip"

// Summary is the final "summary" record of a survey run. The lab writes the
// expected Summary for its world into truth.json, so the two are compared
// field by field. Definitions (shared by the survey and lab/world, which
// computes them independently from ground truth):
//
//   - Domain status on a path: NOERROR when any queried family returned at
//     least one address; otherwise the first non-NOERROR status in query
//     order (A then AAAA); NO_ANSWER when every query was NOERROR without
//     addresses. Resolved = domains with NOERROR; Failed = Domains-Resolved.
//   - A target of cell (P, R) is a unique address resolved on R (of the
//     wanted families). Targets skipped by policy (cross-path private
//     addresses, --max-bytes exhausted) are not in Targets; they are counted
//     in Summary.Skipped. Responsive = at least one probe answered (SYN-ACK or
//     RST for tcp-syn, connect or refused for tcp-connect, echo reply for
//     icmp). HostOverloaded = targets the host could not measure (records
//     marked host_overloaded): in Targets, neither Responsive nor
//     Unresponsive. UnresponsivePct = 100*Unresponsive/(Targets-
//     HostOverloaded) (0 when none; HostOverloaded is 0 unless Degraded).
//   - RTTms summarises the per-target median RTTs of the responsive targets
//     probed directly (RTTViaNAT64ms those probed through a NAT64);
//     percentiles interpolate linearly between closest ranks (numpy default).
//   - Overlap is between the first two paths: OverlapPct = 100*common/|A∪B|;
//     DomainsDifferPct = 100*(domains resolved on both paths whose address
//     sets differ)/domains; DomainsUnresolvedSomewherePct = 100*(domains not
//     NOERROR on at least one path)/domains.
//   - Cells are ordered probe path major, resolve path minor, in path order.
//     A domain's RTT in a cell is the lowest median among its responsive
//     addresses there, probed directly (via a NAT64: its translated RTT,
//     compared only with translated ones, Comparison.Route). Comparisons:
//     for every pair of cells i<j, A=cells[i],
//     B=cells[j], over domains with an RTT in both: MeanDiffMs =
//     mean(rttA-rttB), ASlowerPct = 100*count(rttA > rttB+SlowerMarginMs)/
//     Domains: differences within the margin are ties, or a domain served
//     by the same host in both cells would be "slower" half the time from
//     measurement noise alone.
type Summary struct {
	Type        string              `json:"type"` // "summary"
	Status      string              `json:"status"`
	Resolution  []PathResolution    `json:"resolution"`
	Overlap     Overlap             `json:"overlap"`
	Cells       []Cell              `json:"cells"`
	Comparisons []Comparison        `json:"comparisons"`
	Skipped     []SkippedCount      `json:"skipped,omitempty"`
	BytesSent   map[string]int64    `json:"bytes_sent,omitempty"`
	Invalid     []InvalidPathRecord `json:"invalid,omitempty"`
	// Degraded is set when the host could not keep up.
	Degraded *Degraded `json:"degraded,omitempty"`
}

// PathResolution counts the resolution outcome of one path.
type PathResolution struct {
	Path string `json:"path"`
	// NAT64Prefix is the prefix RFC 7050 discovery found on the path: its
	// AAAA answers inside it were synthesized and count as their IPv4.
	NAT64Prefix netip.Prefix   `json:"nat64_prefix,omitzero"`
	Domains     int            `json:"domains"`
	Resolved    int            `json:"resolved"`
	Failed      int            `json:"failed"`
	ByStatus    map[string]int `json:"by_status"`
	// Synthesized counts the resolved domains whose answers held a
	// synthesized AAAA (each counted as its IPv4).
	Synthesized int `json:"domains_synthesized,omitempty"`
}

// Overlap compares the address sets of the first two paths (004 §III: 58.74%).
type Overlap struct {
	PathA                         string  `json:"path_a"`
	PathB                         string  `json:"path_b"`
	IPsPathA                      int     `json:"ips_path_a"`
	IPsPathB                      int     `json:"ips_path_b"`
	IPsCommon                     int     `json:"ips_common"`
	OverlapPct                    float64 `json:"overlap_pct"`
	DomainsDifferPct              float64 `json:"domains_differ_pct"`
	DomainsUnresolvedSomewherePct float64 `json:"domains_unresolved_somewhere_pct"`
}

// Cell is one (probe path, resolution path) pair: WW, WL, LW or LL.
type Cell struct {
	ProbePath       string   `json:"probe_path"`
	ResolvePath     string   `json:"resolve_path"`
	Targets         int      `json:"targets"`
	Responsive      int      `json:"responsive"`
	Unresponsive    int      `json:"unresponsive"`
	UnresponsivePct float64  `json:"unresponsive_pct"`
	HostOverloaded  int      `json:"host_overloaded,omitempty"`
	RTTms           RTTStats `json:"rtt_ms"` // of the targets probed directly
	// ViaNAT64 of the Targets were probed through the probe path's NAT64
	// (records with route via-nat64), ViaNAT64Responsive of them answered;
	// their RTTs are kept apart from the direct ones (the translator's
	// path is another path).
	ViaNAT64           int       `json:"via_nat64,omitempty"`
	ViaNAT64Responsive int       `json:"via_nat64_responsive,omitempty"`
	RTTViaNAT64ms      *RTTStats `json:"rtt_via_nat64_ms,omitempty"`
}

// RTTStats summarises the per-target median RTTs of a cell, in ms.
type RTTStats struct {
	Min  float64 `json:"min"`
	P10  float64 `json:"p10"`
	P25  float64 `json:"p25"`
	P50  float64 `json:"p50"`
	P75  float64 `json:"p75"`
	P90  float64 `json:"p90"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// SlowerMarginMs is how much higher a domain's RTT in cell A must be than
// in cell B for A to count as slower there (Comparison.ASlowerPct). It is
// half the lab's RTT granularity (whole milliseconds), and above the
// per-target error the lab measures (p95 0.2 ms).
const SlowerMarginMs = 0.5

// Comparison relates two cells: the mean RTT difference (004: "WW vs WL
// about 40 ms") and the share of domains where A is slower than B (004:
// "LL slower than LW in 60%").
type Comparison struct {
	A string `json:"a"` // "probe/resolve", e.g. "wlan0/wwan0"
	B string `json:"b"`
	// Route is "" when both cells' RTTs are direct ones, RouteViaNAT64
	// when both are of targets probed through a NAT64 (a domain's direct
	// and translated RTTs are never compared with each other).
	Route      string  `json:"route,omitempty"`
	MeanDiffMs float64 `json:"mean_diff_ms"`
	Domains    int     `json:"domains"`
	ASlowerPct float64 `json:"a_slower_pct"`
}

// SkippedCount counts targets not probed and why (e.g. cross-path private).
type SkippedCount struct {
	ProbePath   string `json:"probe_path"`
	ResolvePath string `json:"resolve_path"`
	Reason      string `json:"reason"`
	Count       int    `json:"count"`
}

// InvalidPathRecord says a path changed mid-run and from when its records
// are invalid.
type InvalidPathRecord struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
	At     string `json:"at"`
}
