// Package world is the synthetic Internet of the lab: a Tranco-style list
// of domains, two DNS views (one per access path) served by a real
// miekg/dns server, target addresses with per-target extra latency and
// per-path reachability, and the ground truth that a survey of this world
// must find (truth.json, including the expected survey.Summary).
//
// A World is generated deterministically from Options (Generate) or loaded
// from a JSON file (Load/Parse); Save writes it back. Everything else is
// derived from it:
//
//   - WriteTranco writes the "rank,domain" list.
//   - DNSHandler(path) / Serve answer queries the way that path's resolver
//     would (see DNSHandler for the exact behaviour of every status).
//   - Prefixes, Unreachable and ExtraDelays feed the lab topology and the
//     path emulator: the RTT of address T through path P is
//     2*BaseDelay(P) + Target(T).ExtraDelay, and T is dropped on every path
//     listed in Target(T).UnreachableFrom.
//   - Truth computes the expected per-path resolution, reachability, RTTs
//     and survey.Summary, independently of package survey; Truth.Write
//     writes truth.json.
//   - Observe and Truth.CheckServed query a served view the way a survey
//     does and compare the outcome with the truth (the proof that
//     truth.json matches what the lab serves).
//
// Planted categories (Domain.Category; shares in Shares): same, differ
// (per-path CDN replicas with different extra delay), onepath (NOERROR on
// one path, NXDOMAIN or SERVFAIL on the other), nxdomain, servfail,
// timeout (never answered), noanswer (NOERROR without addresses), large
// (TCP fallback needed), private (a private address on one path, which
// only that path can reach); CNAME chains of 1-3 hops are added to some
// same and differ domains. Domains are 60% dual stack, 35% IPv4 only, 5%
// IPv6 only, with one to three addresses. Targets are unreachable from
// both paths (dead), from the first path only (mostly second-path
// replicas: servers behind carrier NAT, 004 Table I) or from the second
// path only, at the rates in Shares.
//
// The world file is JSON: {"options": Options, "domains": [Domain...],
// "targets": {"addr": Target...}}; durations are integer nanoseconds.
//
// Domain names live under the reserved TLD "example." (RFC 2606); queries
// for anything outside it are REFUSED. Addresses come only from the target
// prefixes of the lab address plan (package lab): public 198.19.0.0/17 and
// fd00:ff::/64, private 198.19.128.0/17 and fd00:fe::/64.
package world

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Zone is the DNS zone every world name is under.
const Zone = "example."

// Status names, identical to zdns statuses.
const (
	StatusNoError  = "NOERROR"
	StatusNXDomain = "NXDOMAIN"
	StatusServFail = "SERVFAIL"
	StatusRefused  = "REFUSED"
	StatusTimeout  = "TIMEOUT" // the server never answers
	StatusNoAnswer = "NO_ANSWER"
)

// Categories of domains (what was planted).
const (
	CatSame     = "same"     // identical answer on both paths
	CatDiffer   = "differ"   // per-path CDN replica: different address per path
	CatOnePath  = "onepath"  // NOERROR on one path, NXDOMAIN or SERVFAIL on the other
	CatNXDomain = "nxdomain" // NXDOMAIN on both
	CatServFail = "servfail" // SERVFAIL on both
	CatTimeout  = "timeout"  // never answered on both
	CatNoAnswer = "noanswer" // NOERROR without A/AAAA on both
	CatLarge    = "large"    // same on both, answer too large for UDP (TCP fallback)
	CatPrivate  = "private"  // a private address on one path, a public one on the other
)

// Target prefixes of the lab address plan (see package lab).
var (
	PublicV4  = netip.MustParsePrefix("198.19.0.0/17")
	PublicV6  = netip.MustParsePrefix("fd00:ff::/64")
	PrivateV4 = netip.MustParsePrefix("198.19.128.0/17")
	PrivateV6 = netip.MustParsePrefix("fd00:fe::/64")
)

// DefaultPaths are the two access paths of the lab.
var DefaultPaths = [2]string{"wlan0", "wwan0"}

// Shares are the fractions of domains per category and the reachability
// rates. Same is whatever the other categories leave. CNAME is a modifier
// applied to that fraction of all domains (chosen among same and differ
// domains); it is not a category of its own. The zero Shares means
// DefaultShares (set any field to choose your own).
type Shares struct {
	Differ   float64 `json:"differ"`
	OnePath  float64 `json:"onepath"`
	NXDomain float64 `json:"nxdomain"`
	ServFail float64 `json:"servfail"`
	Timeout  float64 `json:"timeout"`
	NoAnswer float64 `json:"noanswer"`
	Large    float64 `json:"large"`
	Private  float64 `json:"private"`
	CNAME    float64 `json:"cname"`

	// Reachability, as fractions of the public hosts of each kind (004
	// Table I: about 3.3-3.6% unresponsive anywhere, 4.6% of LTE-resolved
	// servers unresponsive from Wi-Fi):
	Dead            float64 `json:"dead"`              // unreachable from both paths
	CarrierNAT      float64 `json:"carrier_nat"`       // second-path replicas unreachable from the first path
	FirstPathBlock  float64 `json:"first_path_block"`  // any host unreachable from the first path only
	SecondPathBlock float64 `json:"second_path_block"` // any host unreachable from the second path only
	// FirstPathV6Block: hosts whose IPv6 address (only) is unreachable
	// from the first path (a Wi-Fi whose IPv6 is black-holed towards some
	// networks). Drawn apart, and only when set, so worlds without it
	// stay as they were.
	FirstPathV6Block float64 `json:"first_path_v6_block,omitempty"`
}

// DefaultShares roughly follow study 004 §III.
func DefaultShares() Shares {
	return Shares{
		Differ: 0.25, OnePath: 0.05, NXDomain: 0.03, ServFail: 0.02,
		Timeout: 0.01, NoAnswer: 0.01, Large: 0.01, Private: 0.02, CNAME: 0.05,
		Dead: 0.03, CarrierNAT: 0.045, FirstPathBlock: 0.002, SecondPathBlock: 0.005,
	}
}

// Options of a generated world.
type Options struct {
	Seed    int64     `json:"seed"`
	Domains int       `json:"domains"`
	Paths   [2]string `json:"paths"` // default DefaultPaths
	Shares  Shares    `json:"shares"`
	// BaseDelay is the one-way delay per path (default wlan0 10ms, wwan0
	// 30ms, i.e. first path 10ms, second path 30ms). JSON: nanoseconds.
	BaseDelay map[string]time.Duration `json:"base_delay_ns"`
}

// World is a synthetic Internet. It is JSON-serialisable; Domains are in
// rank order and every address of every view has an entry in Targets.
type World struct {
	Options `json:"options"`
	Domains []Domain               `json:"domains"`
	Targets map[netip.Addr]*Target `json:"targets"`
}

// Domain is one list entry. Views has one View per path, in the order of
// Options.Paths.
type Domain struct {
	Rank     int    `json:"rank"`
	Name     string `json:"name"` // without the trailing dot, e.g. "alpha1.example"
	Category string `json:"category"`
	Views    []View `json:"views"`
}

// View is what one path's resolver answers for a domain. Status is the
// status of the name itself (NOERROR, NXDOMAIN, SERVFAIL, TIMEOUT or
// NO_ANSWER; NO_ANSWER means NOERROR without A and AAAA records). With
// NOERROR, CNAMEs is the chain from the domain to the name holding the A
// and AAAA records (empty: the domain holds them). Large answers are bigger
// than a UDP reply may be, so clients must retry over TCP.
type View struct {
	Path   string       `json:"path"`
	Status string       `json:"status"`
	CNAMEs []string     `json:"cnames,omitempty"`
	A      []netip.Addr `json:"a,omitempty"`
	AAAA   []netip.Addr `json:"aaaa,omitempty"`
	Large  bool         `json:"large,omitempty"`
}

// Target is one address of the world.
type Target struct {
	Addr            netip.Addr    `json:"addr"`
	ExtraDelay      time.Duration `json:"extra_delay_ns"` // added once per round trip, on every path
	UnreachableFrom []string      `json:"unreachable_from,omitempty"`
	Private         bool          `json:"private,omitempty"`
}

// PathIndex returns the index of path in w.Paths, or -1.
func (w *World) PathIndex(path string) int {
	for i, p := range w.Paths {
		if p == path {
			return i
		}
	}
	return -1
}

// View returns the domain's view for path, or nil.
func (d *Domain) View(path string) *View {
	for i := range d.Views {
		if d.Views[i].Path == path {
			return &d.Views[i]
		}
	}
	return nil
}

// Reachable reports whether t answers probes sent through path.
func (t *Target) Reachable(path string) bool { return !slices.Contains(t.UnreachableFrom, path) }

// BaseDelayOf returns the one-way base delay of path.
func (w *World) BaseDelayOf(path string) time.Duration { return w.BaseDelay[path] }

// ExpectedRTT is the round-trip time of addr through path: twice the
// path's one-way delay plus the target's extra delay.
func (w *World) ExpectedRTT(path string, addr netip.Addr) time.Duration {
	var extra time.Duration
	if t := w.Targets[addr]; t != nil {
		extra = t.ExtraDelay
	}
	return 2*w.BaseDelay[path] + extra
}

// WriteTranco writes the list as "rank,domain" lines (the Tranco format).
func (w *World) WriteTranco(out io.Writer) error {
	var b bytes.Buffer
	for _, d := range w.Domains {
		b.WriteString(fmt.Sprintf("%d,%s\n", d.Rank, d.Name))
		if b.Len() > 64<<10 {
			if _, err := out.Write(b.Bytes()); err != nil {
				return err
			}
			b.Reset()
		}
	}
	_, err := out.Write(b.Bytes())
	return err
}

// Prefixes returns the target prefixes the lab must answer for (AnyIP):
// public and private, IPv4 and IPv6.
func (w *World) Prefixes() (public, private []netip.Prefix) {
	return []netip.Prefix{PublicV4, PublicV6}, []netip.Prefix{PrivateV4, PrivateV6}
}

// Unreachable returns the addresses the emulator must drop on path,
// sorted.
func (w *World) Unreachable(path string) []netip.Addr {
	var out []netip.Addr
	for a, t := range w.Targets {
		if !t.Reachable(path) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// ExtraDelays returns the non-zero per-target extra delays (per round
// trip) to configure in the emulator of every path.
func (w *World) ExtraDelays() map[netip.Addr]time.Duration {
	out := make(map[netip.Addr]time.Duration)
	for a, t := range w.Targets {
		if t.ExtraDelay > 0 {
			out[a] = t.ExtraDelay
		}
	}
	return out
}

// IsPrivate reports whether a is in the private target prefixes.
func IsPrivate(a netip.Addr) bool {
	a = a.Unmap()
	return PrivateV4.Contains(a) || PrivateV6.Contains(a)
}

// InPlan reports whether a is in one of the target prefixes.
func InPlan(a netip.Addr) bool {
	a = a.Unmap()
	return IsPrivate(a) || PublicV4.Contains(a) || PublicV6.Contains(a)
}

// Save writes the world as JSON to path.
func (w *World) Save(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	if err := enc.Encode(w); err != nil {
		f.Close()
		return fmt.Errorf("world: save %s: %w", path, err)
	}
	return f.Close()
}

// Load reads and validates a world file written by Save (or by hand).
func Load(path string) (*World, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	w, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return w, nil
}

// Parse decodes and validates a world from JSON. Unknown fields are
// errors, so typos in hand-written files do not go unnoticed.
func Parse(b []byte) (*World, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var w World
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("world: decode: %w", err)
	}
	if dec.More() {
		return nil, errors.New("world: decode: trailing data after the world object")
	}
	if err := w.Validate(); err != nil {
		return nil, err
	}
	w.Options.Domains = len(w.Domains)
	return &w, nil
}

var knownStatus = map[string]bool{
	StatusNoError: true, StatusNXDomain: true, StatusServFail: true,
	StatusTimeout: true, StatusNoAnswer: true,
}

// Validate checks the world is consistent and safe to serve: two distinct
// paths, unique well-formed names under Zone, one view per path, known
// statuses, addresses only in the lab target prefixes with the right
// family and a Targets entry. It fills in Target.Addr and Private from the
// map key and prefix, and a missing Rank from the position.
func (w *World) Validate() error {
	if w.Paths[0] == "" || w.Paths[1] == "" || w.Paths[0] == w.Paths[1] {
		return fmt.Errorf("world: need two distinct paths, have %q", w.Paths)
	}
	for p, d := range w.BaseDelay {
		if w.PathIndex(p) < 0 {
			return fmt.Errorf("world: base delay for unknown path %q", p)
		}
		if d < 0 || d > time.Minute {
			return fmt.Errorf("world: base delay of %s out of range: %v", p, d)
		}
	}
	for a, t := range w.Targets {
		if t == nil {
			return fmt.Errorf("world: target %s: null", a)
		}
		if !a.IsValid() || !InPlan(a) || a.Is4In6() || a.Zone() != "" {
			return fmt.Errorf("world: target %s outside the lab target prefixes", a)
		}
		if t.Addr.IsValid() && t.Addr != a {
			return fmt.Errorf("world: target key %s holds address %s", a, t.Addr)
		}
		t.Addr = a
		t.Private = IsPrivate(a)
		if t.ExtraDelay < 0 || t.ExtraDelay > time.Minute {
			return fmt.Errorf("world: target %s: extra delay out of range: %v", a, t.ExtraDelay)
		}
		for _, p := range t.UnreachableFrom {
			if w.PathIndex(p) < 0 {
				return fmt.Errorf("world: target %s unreachable from unknown path %q", a, p)
			}
		}
	}
	names := make(map[string]bool, len(w.Domains))
	for i := range w.Domains {
		d := &w.Domains[i]
		if d.Rank == 0 {
			d.Rank = i + 1
		}
		n, err := checkName(d.Name)
		if err != nil {
			return fmt.Errorf("world: domain %d: %w", d.Rank, err)
		}
		if names[n] {
			return fmt.Errorf("world: domain %d: duplicate name %q", d.Rank, d.Name)
		}
		names[n] = true
		if len(d.Views) != 2 {
			return fmt.Errorf("world: domain %q: need one view per path, have %d", d.Name, len(d.Views))
		}
		if d.Views[0].Path == w.Paths[1] && d.Views[1].Path == w.Paths[0] { // keep Views in path order
			d.Views[0], d.Views[1] = d.Views[1], d.Views[0]
		}
		for j, p := range w.Paths {
			v := &d.Views[j]
			if v.Path != p {
				return fmt.Errorf("world: domain %q: no view for path %q", d.Name, p)
			}
			if err := w.checkView(v); err != nil {
				return fmt.Errorf("world: domain %q, path %s: %w", d.Name, p, err)
			}
		}
	}
	for pi := range w.Paths {
		if _, err := w.index(pi); err != nil {
			return err
		}
	}
	return nil
}

func (w *World) checkView(v *View) error {
	if !knownStatus[v.Status] {
		return fmt.Errorf("unknown status %q", v.Status)
	}
	if v.Status != StatusNoError && (len(v.A)+len(v.AAAA)+len(v.CNAMEs) > 0 || v.Large) {
		return fmt.Errorf("status %s with records", v.Status)
	}
	if len(v.CNAMEs) > 8 {
		return fmt.Errorf("CNAME chain longer than 8")
	}
	for _, c := range v.CNAMEs {
		if _, err := checkName(c); err != nil {
			return fmt.Errorf("CNAME: %w", err)
		}
	}
	if len(v.A) > 256 || len(v.AAAA) > 256 {
		return errors.New("more than 256 addresses of a family")
	}
	for _, a := range v.A {
		if !a.Is4() {
			return fmt.Errorf("an A record's address %s is not IPv4", a)
		}
		if w.Targets[a] == nil {
			return fmt.Errorf("address %s has no target entry", a)
		}
	}
	for _, a := range v.AAAA {
		if !a.Is6() || a.Is4In6() {
			return fmt.Errorf("AAAA record %s is not IPv6", a)
		}
		if w.Targets[a] == nil {
			return fmt.Errorf("address %s has no target entry", a)
		}
	}
	return nil
}

// checkName validates a domain name under Zone and returns its canonical
// (lower case, fully qualified) form.
func checkName(name string) (string, error) {
	if name == "" || strings.HasSuffix(name, ".") {
		return "", fmt.Errorf("bad name %q (want e.g. \"a1.example\", no trailing dot)", name)
	}
	fq := strings.ToLower(name) + "."
	if _, ok := dns.IsDomainName(fq); !ok || !dns.IsSubDomain(Zone, fq) || fq == Zone {
		return "", fmt.Errorf("bad name %q: must be a domain name under %q", name, Zone)
	}
	for _, r := range fq {
		if r > 0x7e || r <= ' ' || r == '\\' || r == '"' || r == ',' {
			return "", fmt.Errorf("bad name %q: only plain ASCII host names", name)
		}
	}
	return fq, nil
}
