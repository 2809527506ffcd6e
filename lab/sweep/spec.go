// Package sweep is the experiment driver of `mptester lab sweep`: a grid
// of path settings, transfer sizes, transports and primary paths, each
// cell repeated, run in a lab and summarised per cell (study 004 §IV, the
// controlled heterogeneous-path experiment).
//
// The model (Spec, Cell, presets) is plain data validated once at load;
// Driver runs it against an Env (the lab, or a fake in unit tests), so the
// grid, resume and summary logic needs no namespaces to be tested.
package sweep

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/patterns/transport"
)

// PathNames are the lab's two paths: path 1 (wlan0) and path 2 (wwan0) in
// the study's numbering.
var PathNames = []string{"wlan0", "wwan0"}

// PathGrid lists the values swept for one path; the grid is their
// cartesian product (an empty list is the single value 0).
type PathGrid struct {
	// Delay is one-way, applied in each direction (RTT = 2*Delay).
	Delay  []time.Duration
	Jitter []time.Duration
	// Loss is a probability 0..1 applied in each direction.
	Loss []float64
	// RateBps per direction; 0 is unlimited.
	RateBps []int64
	// Impair: the path's middlebox impairments, each value one whole
	// setting in `lab set` syntax ("block=udp/443 strip=mptcp"; "" is a
	// clean path), checked at load by lab.ParseImpairSetting.
	Impair []string
}

// Spec is a whole sweep.
type Spec struct {
	Name string
	// Paths: wlan0 and wwan0 (PathNames).
	Paths      map[string]PathGrid
	Sizes      []int64 // bulk download sizes in bytes
	Transports []string
	Primaries  []string // primary path of each run (PathNames)
	Reps       int
	// Timeout of one transfer (0: derived from the size and the paths).
	Timeout time.Duration
}

// PathConfig is one path's setting in a cell.
type PathConfig struct {
	Name    string        `json:"name"`
	Delay   time.Duration `json:"delay_ns"` // one-way
	RTT     time.Duration `json:"rtt_ns"`   // 2*Delay, the study's quantity
	Jitter  time.Duration `json:"jitter_ns"`
	Loss    float64       `json:"loss"`
	RateBps int64         `json:"rate_bps"`
	Impair  string        `json:"impair,omitempty"`
}

// Settings renders p in `lab set` syntax.
func (p PathConfig) Settings() string {
	s := fmt.Sprintf("delay=%v jitter=%v loss=%s%%", p.Delay, p.Jitter, fmtPct(p.Loss))
	if p.RateBps > 0 {
		s += fmt.Sprintf(" rate=%dbit", p.RateBps)
	} else {
		s += " rate=0bit"
	}
	return s
}

func fmtPct(f float64) string { return fmt.Sprintf("%g", math.Round(f*1e6)/1e4) }

// Cell is one point of the grid: the paths' settings and one transfer
// configuration; it is run Spec.Reps times.
type Cell struct {
	Index     int          `json:"cell"`
	Paths     []PathConfig `json:"paths"` // PathNames order
	Size      int64        `json:"size"`
	Transport string       `json:"transport"`
	Primary   string       `json:"primary"`
}

// Key identifies a cell's configuration independently of its index.
func (c Cell) Key() string {
	var b strings.Builder
	for _, p := range c.Paths {
		fmt.Fprintf(&b, "%s:%s;", p.Name, p.Settings())
		if p.Impair != "" {
			// Only when set, so a grid without impairments keeps its
			// fingerprint (resumes across this change).
			fmt.Fprintf(&b, "impair=%s;", p.Impair)
		}
	}
	fmt.Fprintf(&b, "%d;%s;%s", c.Size, c.Transport, c.Primary)
	return b.String()
}

// Cells expands the grid. Cells sharing path settings are adjacent (the
// lab is reconfigured once per path setting); within one, sizes, then
// primaries, then transports.
func (s Spec) Cells() []Cell {
	var out []Cell
	for _, pc := range s.pathConfigs() {
		for _, size := range s.Sizes {
			for _, prim := range s.Primaries {
				for _, tr := range s.Transports {
					out = append(out, Cell{Index: len(out), Paths: pc, Size: size, Transport: tr, Primary: prim})
				}
			}
		}
	}
	return out
}

func orZero[T any](v []T) []T {
	if len(v) == 0 {
		var z T
		return []T{z}
	}
	return v
}

func (s Spec) pathConfigs() [][]PathConfig {
	per := make([][]PathConfig, len(PathNames))
	for i, n := range PathNames {
		g := s.Paths[n]
		for _, d := range orZero(g.Delay) {
			for _, l := range orZero(g.Loss) {
				for _, j := range orZero(g.Jitter) {
					for _, r := range orZero(g.RateBps) {
						for _, im := range orZero(g.Impair) {
							per[i] = append(per[i], PathConfig{Name: n, Delay: d, RTT: 2 * d, Jitter: j, Loss: l, RateBps: r, Impair: im})
						}
					}
				}
			}
		}
	}
	out := [][]PathConfig{{}}
	for _, opts := range per {
		var next [][]PathConfig
		for _, prefix := range out {
			for _, o := range opts {
				next = append(next, append(slices.Clone(prefix), o))
			}
		}
		out = next
	}
	return out
}

// Runs is the number of transfers of the sweep.
func (s Spec) Runs() int { return len(s.Cells()) * s.Reps }

// Fingerprint identifies the grid (not its name): a resumed sweep must
// have the same one.
func (s Spec) Fingerprint() string {
	h := sha256.New()
	for _, c := range s.Cells() {
		fmt.Fprintln(h, c.Key())
	}
	fmt.Fprintln(h, s.Reps, s.Timeout)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// FieldError is a bad value of a sweep file or flag, named by its field.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

func fieldErr(field string, format string, a ...any) error {
	return &FieldError{Field: field, Err: fmt.Errorf(format, a...)}
}

// MaxRuns bounds a sweep so a typo cannot queue years of transfers.
const MaxRuns = 1 << 20

// Validate checks every field once; the error names the first bad one.
func (s Spec) Validate() error {
	for n := range s.Paths {
		if !slices.Contains(PathNames, n) {
			return fieldErr("paths."+n, "unknown path (want %s)", strings.Join(PathNames, " or "))
		}
	}
	for _, n := range PathNames {
		g := s.Paths[n]
		for i, d := range g.Delay {
			if d < 0 || d > 10*time.Second {
				return fieldErr(fmt.Sprintf("paths.%s.delay[%d]", n, i), "%v outside 0..10s", d)
			}
		}
		for i, d := range g.Jitter {
			if d < 0 || d > 10*time.Second {
				return fieldErr(fmt.Sprintf("paths.%s.jitter[%d]", n, i), "%v outside 0..10s", d)
			}
		}
		for i, l := range g.Loss {
			if !(l >= 0 && l <= 1) {
				return fieldErr(fmt.Sprintf("paths.%s.loss[%d]", n, i), "%g%% outside 0..100%%", l*100)
			}
		}
		for i, r := range g.RateBps {
			if r < 0 {
				return fieldErr(fmt.Sprintf("paths.%s.rate[%d]", n, i), "negative rate %d", r)
			}
		}
		// Two spellings of one setting ("" and "none", tokens in
		// another order) would be two cells measuring the same thing.
		seen := map[string]int{}
		for i, im := range g.Impair {
			ic, err := lab.ParseImpairSetting(im)
			if err != nil {
				return fieldErr(fmt.Sprintf("paths.%s.impair[%d]", n, i), "%v", err)
			}
			imp, _ := lab.Impair{}.Apply(ic) // checked by ParseImpairSetting
			key := strings.Join(imp.Settings(), " ")
			if j, dup := seen[key]; dup {
				return fieldErr(fmt.Sprintf("paths.%s.impair[%d]", n, i), "%q given twice (as impair[%d])", im, j)
			}
			seen[key] = i
		}
	}
	if len(s.Sizes) == 0 {
		return fieldErr("sizes", "at least one transfer size needed")
	}
	for i, z := range s.Sizes {
		if z <= 0 || z > 1<<32 {
			return fieldErr(fmt.Sprintf("sizes[%d]", i), "%d outside 1..4GiB", z)
		}
	}
	if len(s.Transports) == 0 {
		return fieldErr("transports", "at least one transport needed")
	}
	for i, t := range s.Transports {
		d, err := transport.Get(t)
		if err != nil {
			return fieldErr(fmt.Sprintf("transports[%d]", i), "%q is not a registered transport (have %s)", t, strings.Join(transport.Names(), ", "))
		}
		// The transfer is the bulk pattern, an HTTP download.
		if !d.Carries(transport.FamilyHTTP) {
			return fieldErr(fmt.Sprintf("transports[%d]", i), "%q does not carry HTTP, which the bulk download needs", t)
		}
		if slices.Index(s.Transports, t) != i {
			return fieldErr(fmt.Sprintf("transports[%d]", i), "%q given twice", t)
		}
	}
	if len(s.Primaries) == 0 {
		return fieldErr("primaries", "at least one primary path needed")
	}
	for i, p := range s.Primaries {
		if !slices.Contains(PathNames, p) {
			return fieldErr(fmt.Sprintf("primaries[%d]", i), "%q is not a lab path (want %s)", p, strings.Join(PathNames, " or "))
		}
		if slices.Index(s.Primaries, p) != i {
			return fieldErr(fmt.Sprintf("primaries[%d]", i), "%q given twice", p)
		}
	}
	if s.Reps < 1 {
		return fieldErr("repetitions", "%d: at least 1", s.Reps)
	}
	if s.Timeout < 0 {
		return fieldErr("timeout", "negative %v", s.Timeout)
	}
	n := 1
	for _, pc := range PathNames {
		g := s.Paths[pc]
		n *= max(1, len(g.Delay)) * max(1, len(g.Jitter)) * max(1, len(g.Loss)) * max(1, len(g.RateBps)) * max(1, len(g.Impair))
		if n > MaxRuns {
			break
		}
	}
	if n*len(s.Sizes)*len(s.Transports)*len(s.Primaries)*s.Reps > MaxRuns {
		return fieldErr("repetitions", "the grid has more than %d transfers", MaxRuns)
	}
	return nil
}

// fileSpec is the sweep file's YAML form (quantities as text a person
// writes: "25ms", "0.5%", "100mbit", "128KiB").
type fileSpec struct {
	Name        string              `yaml:"name"`
	Paths       map[string]filePath `yaml:"paths"`
	Sizes       []string            `yaml:"sizes"`
	Transports  []string            `yaml:"transports"`
	Primaries   []string            `yaml:"primaries"`
	Repetitions int                 `yaml:"repetitions"`
	Timeout     string              `yaml:"timeout"`
}

type filePath struct {
	Delay  []string `yaml:"delay"`
	RTT    []string `yaml:"rtt"`
	Jitter []string `yaml:"jitter"`
	Loss   []string `yaml:"loss"`
	Rate   []string `yaml:"rate"`
	Impair []string `yaml:"impair"`
}

// Parse reads a sweep file (YAML; JSON is YAML too). Unknown keys, bad
// quantities and invalid values are errors naming the field.
func Parse(b []byte) (Spec, error) {
	var f fileSpec
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return Spec{}, fmt.Errorf("sweep file: %w", err)
	}
	s := Spec{Name: f.Name, Paths: map[string]PathGrid{}, Transports: f.Transports, Primaries: f.Primaries, Reps: f.Repetitions}
	for n, p := range f.Paths {
		if len(p.Delay) > 0 && len(p.RTT) > 0 {
			return Spec{}, fieldErr("paths."+n, "give delay (one-way) or rtt, not both")
		}
		var g PathGrid
		var err error
		pre := "paths." + n + "."
		if g.Delay, err = ParseList(pre+"delay", p.Delay, time.ParseDuration); err != nil {
			return Spec{}, err
		}
		if len(p.RTT) > 0 {
			if g.Delay, err = ParseList(pre+"rtt", p.RTT, ParseRTT); err != nil {
				return Spec{}, err
			}
		}
		if g.Jitter, err = ParseList(pre+"jitter", p.Jitter, time.ParseDuration); err != nil {
			return Spec{}, err
		}
		if g.Loss, err = ParseList(pre+"loss", p.Loss, ParseLoss); err != nil {
			return Spec{}, err
		}
		if g.RateBps, err = ParseList(pre+"rate", p.Rate, ParseRate); err != nil {
			return Spec{}, err
		}
		g.Impair = p.Impair
		s.Paths[n] = g
	}
	var err error
	if s.Sizes, err = ParseList("sizes", f.Sizes, ParseSize); err != nil {
		return Spec{}, err
	}
	if f.Timeout != "" {
		d, err := time.ParseDuration(f.Timeout)
		if err != nil {
			return Spec{}, fieldErr("timeout", "%v", err)
		}
		s.Timeout = d
	}
	return s, s.Validate()
}

// ParseList parses each value of a list; the error names field[i].
func ParseList[T any](field string, vals []string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for i, v := range vals {
		x, err := parse(v)
		if err != nil {
			return nil, fieldErr(fmt.Sprintf("%s[%d]", field, i), "%v", err)
		}
		out = append(out, x)
	}
	return out, nil
}

// ParseRTT reads an RTT ("200ms") as the one-way delay set on each
// direction, half of it.
func ParseRTT(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	return d / 2, err
}

// ParseLoss reads "0.5%" (or a bare probability "0.005").
func ParseLoss(v string) (float64, error) {
	v = strings.TrimSpace(v)
	pct := strings.HasSuffix(v, "%")
	f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
	if err != nil {
		return 0, fmt.Errorf("bad loss %q (want e.g. 0.5%%)", v)
	}
	if pct {
		f /= 100
	}
	if !(f >= 0 && f <= 1) {
		return 0, fmt.Errorf("loss %q outside 0..100%%", v)
	}
	return f, nil
}

var units = []struct {
	suffix string
	mult   int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"kB", 1e3}, {"B", 1}}

// ParseSize reads "128KiB", "2MiB", "1000000" (bytes).
func ParseSize(v string) (int64, error) {
	return parseUnit(strings.TrimSpace(v), units, "size", "128KiB")
}

var rateUnits = []struct {
	suffix string
	mult   int64
}{{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1}}

// ParseRate reads "100mbit" (bits/s; "0" is unlimited).
func ParseRate(v string) (int64, error) {
	return parseUnit(strings.TrimSpace(v), rateUnits, "rate", "100mbit")
}

func parseUnit(v string, us []struct {
	suffix string
	mult   int64
}, what, example string) (int64, error) {
	num, mult := v, int64(1)
	for _, u := range us {
		if strings.HasSuffix(v, u.suffix) {
			num, mult = strings.TrimSuffix(v, u.suffix), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("bad %s %q (want e.g. %s)", what, v, example)
	}
	if f < 0 || f*float64(mult) > math.MaxInt64/2 || math.IsNaN(f) {
		return 0, fmt.Errorf("%s %q out of range", what, v)
	}
	return int64(math.Round(f * float64(mult))), nil
}

// ErrUnknownPreset: --preset names no preset.
var ErrUnknownPreset = errors.New("unknown preset")

// MarshalJSON writes the spec as recorded in the output's header.
func (s Spec) MarshalJSON() ([]byte, error) {
	type grid struct {
		Delay   []time.Duration `json:"delay_ns,omitempty"`
		Jitter  []time.Duration `json:"jitter_ns,omitempty"`
		Loss    []float64       `json:"loss,omitempty"`
		RateBps []int64         `json:"rate_bps,omitempty"`
		Impair  []string        `json:"impair,omitempty"`
	}
	paths := map[string]grid{}
	for n, g := range s.Paths {
		paths[n] = grid(g)
	}
	return json.Marshal(struct {
		Name       string          `json:"name"`
		Paths      map[string]grid `json:"paths"`
		Sizes      []int64         `json:"sizes"`
		Transports []string        `json:"transports"`
		Primaries  []string        `json:"primaries"`
		Reps       int             `json:"repetitions"`
		Timeout    time.Duration   `json:"timeout_ns,omitempty"`
	}{s.Name, paths, s.Sizes, s.Transports, s.Primaries, s.Reps, s.Timeout})
}
