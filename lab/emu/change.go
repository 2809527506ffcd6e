package emu

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Change is a set of parameter edits in settings syntax, shared by
// `mptester lab set` and timelines:
//
//	delay=200ms jitter=5ms loss=30% rate=10mbit queue=64kb ge=p,r,lossgood,lossbad
//	ecn=bleach|ce/N|off down up
//
// Keys may be prefixed "up." or "down." to hit one direction; unprefixed
// keys set both. Nil fields are left unchanged.
type Change struct {
	Dir  [2]FieldChange // indexed by Direction
	Down *bool          // set the link down (true) or up (false)
}

// FieldChange holds the fields a Change sets for one direction.
type FieldChange struct {
	Delay      *time.Duration
	Jitter     *time.Duration
	Loss       *float64
	GE         **GilbertElliott // points to nil for ge=off
	RateBps    *int64
	QueueBytes *int
	ECN        *ECN
}

func (f FieldChange) empty() bool {
	return f.Delay == nil && f.Jitter == nil && f.Loss == nil && f.GE == nil && f.RateBps == nil && f.QueueBytes == nil && f.ECN == nil
}

func (f FieldChange) apply(p *Params) {
	if f.Delay != nil {
		p.Delay = *f.Delay
	}
	if f.Jitter != nil {
		p.Jitter = *f.Jitter
	}
	if f.Loss != nil {
		p.Loss = *f.Loss
	}
	if f.GE != nil {
		p.GE = *f.GE
	}
	if f.RateBps != nil {
		p.RateBps = *f.RateBps
	}
	if f.QueueBytes != nil {
		p.QueueBytes = *f.QueueBytes
	}
	if f.ECN != nil {
		p.ECN = *f.ECN
	}
}

// IsZero reports whether c changes nothing.
func (c Change) IsZero() bool { return c.Down == nil && c.Dir[Up].empty() && c.Dir[Down].empty() }

// String renders c in settings syntax; a field set alike for both
// directions is written once, unprefixed.
func (c Change) String() string {
	var s []string
	up, dn := c.Dir[Up].tokens(), c.Dir[Down].tokens()
	for i := range up {
		switch {
		case up[i] != "" && up[i] == dn[i]:
			s = append(s, up[i])
		default:
			if up[i] != "" {
				s = append(s, "up."+up[i])
			}
			if dn[i] != "" {
				s = append(s, "down."+dn[i])
			}
		}
	}
	if c.Down != nil {
		if *c.Down {
			s = append(s, "down")
		} else {
			s = append(s, "up")
		}
	}
	return strings.Join(s, " ")
}

// tokens renders each field ("" when unset) in a fixed order.
func (f FieldChange) tokens() [7]string {
	var t [7]string
	if f.Delay != nil {
		t[0] = "delay=" + f.Delay.String()
	}
	if f.Jitter != nil {
		t[1] = "jitter=" + f.Jitter.String()
	}
	if f.Loss != nil {
		t[2] = "loss=" + strconv.FormatFloat(*f.Loss*100, 'g', -1, 64) + "%"
	}
	if f.GE != nil {
		if g := *f.GE; g == nil {
			t[3] = "ge=off"
		} else {
			t[3] = fmt.Sprintf("ge=%g,%g,%g,%g", g.P, g.R, g.LossGood, g.LossBad)
		}
	}
	if f.RateBps != nil {
		t[4] = "rate=" + strconv.FormatInt(*f.RateBps, 10) + "bit"
	}
	if f.QueueBytes != nil {
		t[5] = "queue=" + strconv.Itoa(*f.QueueBytes) + "b"
	}
	if f.ECN != nil {
		t[6] = "ecn=" + f.ECN.String()
	}
	return t
}

// ParseChange parses settings tokens (each argument may hold several
// space-separated tokens). The error names the bad token.
func ParseChange(args []string) (Change, error) {
	var c Change
	for _, arg := range args {
		for _, tok := range strings.Fields(arg) {
			if err := c.parseToken(tok); err != nil {
				return Change{}, fmt.Errorf("bad setting %q: %w", tok, err)
			}
		}
	}
	return c, nil
}

func (c *Change) parseToken(tok string) error {
	switch strings.ToLower(tok) {
	case "down":
		t := true
		c.Down = &t
		return nil
	case "up":
		f := false
		c.Down = &f
		return nil
	}
	key, val, ok := strings.Cut(tok, "=")
	if !ok {
		return fmt.Errorf("want key=value, down or up")
	}
	key = strings.ToLower(key)
	dirs := []Direction{Up, Down}
	if k, ok := strings.CutPrefix(key, "up."); ok {
		key, dirs = k, []Direction{Up}
	} else if k, ok := strings.CutPrefix(key, "down."); ok {
		key, dirs = k, []Direction{Down}
	}
	var set func(f *FieldChange)
	switch key {
	case "delay", "jitter":
		d, err := parseDuration(val)
		if err != nil {
			return err
		}
		if key == "delay" {
			set = func(f *FieldChange) { f.Delay = &d }
		} else {
			set = func(f *FieldChange) { f.Jitter = &d }
		}
	case "loss":
		p, err := parseProb(val)
		if err != nil {
			return err
		}
		set = func(f *FieldChange) { f.Loss = &p }
	case "ge":
		g, err := parseGE(val)
		if err != nil {
			return err
		}
		set = func(f *FieldChange) { f.GE = &g }
	case "rate":
		r, err := parseRate(val)
		if err != nil {
			return err
		}
		set = func(f *FieldChange) { f.RateBps = &r }
	case "queue":
		q, err := parseBytes(val)
		if err != nil {
			return err
		}
		set = func(f *FieldChange) { f.QueueBytes = &q }
	case "ecn":
		e, err := parseECN(val)
		if err != nil {
			return err
		}
		set = func(f *FieldChange) { f.ECN = &e }
	default:
		return fmt.Errorf("unknown key %q (want delay, jitter, loss, ge, rate, queue or ecn, optionally prefixed up. or down.)", key)
	}
	for _, d := range dirs {
		set(&c.Dir[d])
	}
	return nil
}

const maxDelay = time.Hour

func parseDuration(s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("not a duration (e.g. 25ms)")
	}
	if d < 0 || d > maxDelay {
		return 0, fmt.Errorf("duration out of range [0, %v]", maxDelay)
	}
	return d, nil
}

// parseProb accepts "30%" or a fraction "0.3".
func parseProb(s string) (float64, error) {
	scale := 1.0
	if t, ok := strings.CutSuffix(s, "%"); ok {
		s, scale = t, 100
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) {
		return 0, fmt.Errorf("not a probability (e.g. 30%% or 0.3)")
	}
	f /= scale
	if f < 0 || f > 1 {
		return 0, fmt.Errorf("probability out of range [0, 1]")
	}
	return f, nil
}

// parseGE accepts "off", "p,r" (bad state loses all, good state none) or
// "p,r,lossgood,lossbad".
func parseGE(s string) (*GilbertElliott, error) {
	if strings.EqualFold(s, "off") || s == "0" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) != 2 && len(parts) != 4 {
		return nil, fmt.Errorf("want ge=p,r or ge=p,r,lossgood,lossbad or ge=off")
	}
	v := []float64{0, 0, 0, 1}
	for i, p := range parts {
		f, err := parseProb(p)
		if err != nil {
			return nil, fmt.Errorf("value %d %q: %w", i+1, p, err)
		}
		v[i] = f
	}
	return &GilbertElliott{P: v[0], R: v[1], LossGood: v[2], LossBad: v[3]}, nil
}

// parseRate accepts bits per second with tc-style units: bit, kbit, mbit,
// gbit (powers of 1000). Byte units (tc's kbps = kilobytes/s) are refused
// as too easy to misread. "0", "off" and "unlimited" mean no limit.
func parseRate(s string) (int64, error) {
	ls := strings.ToLower(s)
	switch ls {
	case "0", "off", "unlimited":
		return 0, nil
	}
	mult := 1.0
	for _, u := range []struct {
		suf string
		m   float64
	}{{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1}} {
		if t, ok := strings.CutSuffix(ls, u.suf); ok {
			ls, mult = t, u.m
			break
		}
	}
	if strings.HasSuffix(ls, "bps") {
		return 0, fmt.Errorf("ambiguous unit: use bit, kbit, mbit or gbit (bits per second)")
	}
	f, err := strconv.ParseFloat(ls, 64)
	if err != nil || math.IsNaN(f) {
		return 0, fmt.Errorf("not a rate (e.g. 10mbit)")
	}
	r := f * mult
	if r < 0 || r > 1e12 {
		return 0, fmt.Errorf("rate out of range [0, 1000gbit]")
	}
	if r > 0 && r < 1000 {
		return 0, fmt.Errorf("rate below 1kbit")
	}
	return int64(r), nil
}

// parseBytes accepts b, kb, mb (powers of 1024, like tc) or a plain number
// of bytes. "0" means the default queue.
func parseBytes(s string) (int, error) {
	ls := strings.ToLower(s)
	mult := 1.0
	for _, u := range []struct {
		suf string
		m   float64
	}{{"kib", 1024}, {"mib", 1 << 20}, {"kb", 1024}, {"mb", 1 << 20}, {"k", 1024}, {"m", 1 << 20}, {"b", 1}} {
		if t, ok := strings.CutSuffix(ls, u.suf); ok {
			ls, mult = t, u.m
			break
		}
	}
	f, err := strconv.ParseFloat(ls, 64)
	if err != nil || math.IsNaN(f) {
		return 0, fmt.Errorf("not a size (e.g. 64kb)")
	}
	b := f * mult
	if b < 0 || b > 1<<30 {
		return 0, fmt.Errorf("size out of range [0, 1gb]")
	}
	return int(b), nil
}

// Apply applies c to the link; fields c leaves nil keep their values.
func (l *Link) Apply(c Change) {
	for _, d := range []Direction{Up, Down} {
		if f := c.Dir[d]; !f.empty() {
			p := l.Params(d)
			f.apply(&p)
			l.Set(d, p)
		}
	}
	if c.Down != nil {
		l.SetDown(*c.Down)
	}
}

// Event of a timeline: at time At since the start, apply Change to Path.
type Event struct {
	At     time.Duration
	Path   string
	Change Change
	// Extra are the event's settings the emulator does not own (the lab's
	// impairments), given by ParseTimelineExtra's extra; the caller of
	// RunTimelineFunc applies them in its before hook.
	Extra []string
}

// ParseTimeline parses a timeline file: one event per line,
//
//	t=5s wlan0 loss=5%
//	10s wlan0 down      # comment
//
// Blank lines and '#' comments are ignored. Events are returned sorted by
// time; events at the same time keep their file order. Errors name the line.
func ParseTimeline(r io.Reader) ([]Event, error) { return ParseTimelineExtra(r, nil) }

// ParseTimelineExtra is ParseTimeline where extra (when not nil) claims
// settings for Event.Extra: it returns an error for a bad one, and ok for
// one it owns.
func ParseTimelineExtra(r io.Reader, extra func(tok string) (ok bool, err error)) ([]Event, error) {
	var evs []Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for ln := 1; sc.Scan(); ln++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 3 {
			return nil, fmt.Errorf("timeline line %d: want \"t=TIME PATH SETTINGS...\"", ln)
		}
		ts := strings.TrimPrefix(f[0], "t=")
		at, err := time.ParseDuration(ts)
		if ts == "0" {
			at, err = 0, nil
		}
		if err != nil || at < 0 {
			return nil, fmt.Errorf("timeline line %d: bad time %q (e.g. t=5s)", ln, f[0])
		}
		var own, ext []string
		for _, tok := range f[2:] {
			if extra != nil {
				ok, err := extra(tok)
				if err != nil {
					return nil, fmt.Errorf("timeline line %d: %w", ln, err)
				}
				if ok {
					ext = append(ext, tok)
					continue
				}
			}
			own = append(own, tok)
		}
		c, err := ParseChange(own)
		if err != nil {
			return nil, fmt.Errorf("timeline line %d: %w", ln, err)
		}
		evs = append(evs, Event{At: at, Path: f[1], Change: c, Extra: ext})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("timeline: %w", err)
	}
	slices.SortStableFunc(evs, func(a, b Event) int {
		switch {
		case a.At < b.At:
			return -1
		case a.At > b.At:
			return 1
		}
		return 0
	})
	return evs, nil
}

// RunTimeline applies each event at its time since the call (Go timers:
// about a millisecond late at most on an idle host). It checks every path
// name first. It returns ctx.Err() if ctx ends before the last event.
func RunTimeline(ctx context.Context, events []Event, links map[string]*Link) error {
	return RunTimelineFunc(ctx, events, links, nil, nil)
}

// RunTimelineFunc is RunTimeline calling before (when not nil) right
// before event i is applied and applied right after it took effect, with
// the time it did: the ground truth of when a step really happened.
func RunTimelineFunc(ctx context.Context, events []Event, links map[string]*Link, before func(i int), applied func(i int, at time.Time)) error {
	for i, e := range events {
		if links[e.Path] == nil {
			return fmt.Errorf("timeline event %d (t=%v): unknown path %q", i+1, e.At, e.Path)
		}
	}
	start := time.Now()
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	for i, e := range events {
		if wait := e.At - time.Since(start); wait > 0 {
			t.Reset(wait)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
			}
		} else if err := ctx.Err(); err != nil {
			return err
		}
		if before != nil {
			before(i)
		}
		links[e.Path].Apply(e.Change)
		if applied != nil {
			applied(i, time.Now())
		}
	}
	return nil
}
