// Package caps is the probe owner's last word over fleet tasks: the
// limits of the agent: section of the probe's local config, which no
// schedule can raise. The agent checks every task against them before it
// runs it; the collector checks a schedule against the caps its probes
// reported (or the defaults) before it stores it. A task outside the caps
// is refused, never trimmed.
package caps

import (
	"cmp"
	"crypto/ed25519"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/mptester/mptester/collect/api"
	"github.com/mptester/mptester/internal/bogon"
)

// Caps are one probe's limits.
type Caps struct {
	// MaxRate bounds a survey's probes per second.
	MaxRate float64 `json:"max_rate"`
	// MaxDuration bounds a test's duration, timeouts and grace, a
	// survey's spacing and DNS waits, and every task's wall time: the
	// agent ends a task (its process group) at it.
	MaxDuration api.Duration `json:"max_duration"`
	// Types are the measurement types this probe runs.
	Types []string `json:"types"`
	// AllowPrivate lets tasks name private, reserved and local targets
	// (never by default, whatever the task says).
	AllowPrivate bool `json:"allow_private,omitempty"`
	// Public prefixes are not private despite the bogon table (the lab's
	// synthetic Internet).
	Public []netip.Prefix `json:"public_prefixes,omitempty"`
	// Paths may carry active traffic; empty: any.
	Paths []string `json:"paths,omitempty"`
	// Budget is the bytes each path may carry per calendar month (UTC),
	// counted from the bytes the results record.
	Budget map[string]int64 `json:"budget,omitempty"`
	// ScheduleKey, when set, is the fleet operator's Ed25519 public key:
	// only schedules it signed run, for this probe or every probe, and
	// never one with a lower serial than one that ran.
	ScheduleKey ed25519.PublicKey `json:"schedule_key,omitempty"`
}

// CheckSigned returns why s may not run on probe under c's pinned key
// ("" when it may, or when no key is pinned); highest is the highest
// serial that ran here.
func (c Caps) CheckSigned(s api.Schedule, probe string, highest int64) string {
	if len(c.ScheduleKey) == 0 {
		return ""
	}
	switch {
	case s.Signed == nil:
		return "the schedule is not signed, and this probe's owner pinned the fleet operator's key"
	case !ed25519.Verify(c.ScheduleKey, s.Signed.Payload, s.Signed.Sig):
		return "the schedule's signature does not verify with the pinned key"
	case s.Probe != "*" && s.Probe != probe:
		return fmt.Sprintf("the schedule was signed for probe %q", s.Probe)
	case s.Serial < highest:
		return fmt.Sprintf("stale signed schedule: serial %d, this probe already ran serial %d", s.Serial, highest)
	}
	return ""
}

// The survey command's defaults for what a task leaves unset (internal/cmd/survey).
const (
	SurveyDefaultCount      = 10
	SurveyDefaultDNSRetries = 2
)

// Defaults apply to a probe whose owner set no agent: section.
func Defaults() Caps {
	return Caps{MaxRate: 200, MaxDuration: api.Duration(2 * time.Minute), Types: []string{api.TypeSurvey, api.TypeRun}}
}

// Check refuses t when it asks for more than c allows; the error names the
// field. Host names are not resolved here (the agent resolves them with
// CheckAddrs before running).
func (c Caps) Check(t api.Task) error {
	bad := func(field, format string, args ...any) error {
		return &api.FieldError{Task: t.Name, Field: field, Reason: fmt.Sprintf(format, args...) + " (the probe owner's cap)"}
	}
	if !slices.Contains(c.Types, t.Type) {
		return bad("type", "measurement type %q is not allowed on this probe (allowed: %s)", t.Type, strings.Join(c.Types, ", "))
	}
	paths := t.Paths()
	if len(c.Paths) > 0 {
		for _, p := range paths {
			if !slices.Contains(c.Paths, p) {
				return bad(t.Type+".paths", "path %s may not carry active traffic (allowed: %s)", p, strings.Join(c.Paths, ", "))
			}
		}
	}
	durs := map[string]api.Duration{}
	var hosts []string
	if p := t.Survey; p != nil {
		if p.Rate > c.MaxRate {
			return bad("survey.rate", "%g probes/s is over the cap of %g", p.Rate, c.MaxRate)
		}
		durs["survey.timeout"], durs["survey.spacing"], durs["survey.dns_timeout"] = p.Timeout, p.Spacing, p.DNSTimeout
		// What one target can take at least, with the command's defaults
		// (count 10, dns_retries 2) for what the task leaves unset: each
		// alone must fit in the cap, the task as a whole is cut at it.
		count, retries := cmp.Or(p.Count, SurveyDefaultCount), SurveyDefaultDNSRetries
		if p.DNSRetries != nil {
			retries = *p.DNSRetries
		}
		durs["survey.spacing x count"] = p.Spacing * api.Duration(max(count-1, 0))
		durs["survey.dns_timeout x (dns_retries+1)"] = p.DNSTimeout * api.Duration(retries+1)
		hosts = append(hosts, p.Domains...)
	}
	if p := t.Run; p != nil {
		durs["run.duration"], durs["run.timeout"], durs["run.grace"], durs["run.connect_timeout"] = p.Duration, p.Timeout, p.Grace, p.ConnectTimeout
		if p.Pace != nil {
			durs["run.pace"] = *p.Pace
		}
		for _, s := range p.Servers {
			hosts = append(hosts, HostOf(s))
		}
		if p.ServerName != "" {
			hosts = append(hosts, p.ServerName)
		}
	}
	for _, f := range slices.Sorted(maps.Keys(durs)) {
		if durs[f] > c.MaxDuration {
			return bad(f, "%v is over the cap of %v", time.Duration(durs[f]), time.Duration(c.MaxDuration))
		}
	}
	for _, h := range hosts {
		if a, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
			if err := c.CheckAddrs(t, h, []netip.Addr{a}); err != nil {
				return err
			}
		} else if strings.EqualFold(strings.TrimSuffix(h, "."), "localhost") || strings.HasSuffix(strings.ToLower(strings.TrimSuffix(h, ".")), ".localhost") {
			return bad(t.Type, "target %s is this host", h)
		}
	}
	return nil
}

// CheckAddrs refuses the target host of t when any of its addresses is
// private, reserved or on one of local (this host's subnets), unless the
// owner allows private targets.
func (c Caps) CheckAddrs(t api.Task, host string, addrs []netip.Addr, local ...netip.Prefix) error {
	if c.AllowPrivate {
		return nil
	}
	for _, a := range addrs {
		a = a.Unmap()
		priv := bogon.Contains(a, c.Public)
		for _, p := range local {
			priv = priv || p.Contains(a)
		}
		if priv {
			what := host
			if what != a.String() {
				what += " (" + a.String() + ")"
			}
			return &api.FieldError{Task: t.Name, Field: t.Type, Reason: "target " + what + " is a private or local address; this probe's owner does not allow private targets"}
		}
	}
	return nil
}

// HostOf strips the port of HOST[:PORT] ("[v6]:port" too).
func HostOf(s string) string {
	if h, _, err := net.SplitHostPort(s); err == nil {
		return h
	}
	return strings.Trim(s, "[]")
}
