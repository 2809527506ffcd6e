package survey

import (
	"context"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/mptester/mptester/probe"
)

// ResolutionRecord is one "resolution" line: one domain on one path.
type ResolutionRecord struct {
	Type    string       `json:"type"` // "resolution"
	Domain  string       `json:"domain"`
	Rank    int          `json:"rank"`
	Path    string       `json:"path"`
	Status  string       `json:"status"`
	Answers []netip.Addr `json:"answers"`
	// AnswersMapped is Answers with the AAAA a DNS64 synthesized (inside
	// the path's NAT64 prefix) replaced by the IPv4 they embed: the
	// addresses the overlap and the cells count. Absent when no answer
	// was synthesized.
	AnswersMapped []netip.Addr  `json:"answers_mapped,omitempty"`
	CNAMEs        []string      `json:"cname_chain,omitempty"`
	TimeMs        float64       `json:"time_ms"`
	Queries       []QueryResult `json:"queries"`
	Bytes         int64         `json:"bytes"` // bytes sent for these queries, earlier tries of a lookup done again included (IP packets, estimated for TCP)
	Valid         bool          `json:"valid"`
}

// QueryResult is one A or AAAA query, after retries.
type QueryResult struct {
	QType    string `json:"qtype"`
	Status   string `json:"status"`
	Server   string `json:"server,omitempty"`
	TCP      bool   `json:"tcp,omitempty"`
	Attempts int    `json:"attempts"`
	// HostRetries of the attempts were added because the host may have
	// lost an earlier one (it dropped packets or stalled while its answer
	// was due); HostSuspect: TIMEOUT, but a counted attempt too may have
	// been the host's loss.
	HostRetries int     `json:"host_retries,omitempty"`
	HostSuspect bool    `json:"host_suspect,omitempty"`
	TimeMs      float64 `json:"time_ms"`
	Error       string  `json:"error,omitempty"`
}

// Resolver is the survey's view of a probe.Resolver: it turns each lookup
// into a resolution record.
type Resolver struct {
	Path    probe.Path
	r       *probe.Resolver
	servers []netip.AddrPort // for logs
}

// NewResolver returns a resolver for p querying p's own DNS servers, each
// with an adaptive window of at most cap queries in flight, or an error
// when p has no DNS. hostLost (may be nil) says whether the host may have
// lost packets in an interval: an attempt it may have lost is not counted.
func NewResolver(p probe.Path, timeout time.Duration, retries, cap int, bytes *atomic.Int64, hostLost func(from, to time.Time) bool) (*Resolver, error) {
	r, err := probe.NewResolver(p, probe.ResolverOptions{Timeout: timeout, Retries: retries, Cap: cap, Bytes: bytes, Adaptive: true, HostLost: hostLost})
	if err != nil {
		return nil, err
	}
	return &Resolver{Path: p, r: r, servers: r.Servers()}, nil
}

// Resolve looks d up for the wanted families (A then AAAA).
func (r *Resolver) Resolve(ctx context.Context, d Domain, fam probe.Family) ResolutionRecord {
	return r.record(d, r.r.Lookup(ctx, d.Name, fam))
}

// Start looks d up and calls done with its record from another goroutine:
// a lookup in flight is state in the resolver, not a goroutine.
func (r *Resolver) Start(ctx context.Context, d Domain, fam probe.Family, done func(ResolutionRecord)) {
	r.r.Start(ctx, d.Name, fam, func(l probe.Lookup) { done(r.record(d, l)) })
}

func (r *Resolver) record(d Domain, l probe.Lookup) ResolutionRecord {
	rec := ResolutionRecord{Type: "resolution", Domain: d.Name, Rank: d.Rank, Path: r.Path.Name, Status: l.Status,
		Answers: l.Answers, CNAMEs: l.CNAMEs, TimeMs: msOf(l.Time), Bytes: l.Bytes, Valid: true}
	if len(l.Queries) > 0 {
		rec.Queries = make([]QueryResult, 0, len(l.Queries))
	}
	for _, q := range l.Queries {
		qr := QueryResult{QType: q.QType, Status: q.Status, TCP: q.TCP, Attempts: q.Attempts, HostRetries: q.HostRetries,
			HostSuspect: q.HostSuspect, TimeMs: msOf(q.Time)}
		if q.Server.IsValid() {
			qr.Server = q.Server.String()
		}
		if q.Err != nil {
			qr.Error = q.Err.Error()
		}
		rec.Queries = append(rec.Queries, qr)
	}
	return rec
}
