package sweep

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Transfer sizes of 004 §IV: 128KB, 256KB, 512KB, 1MB and 2MB, iperf -n
// sizes (binary multiples, as iperf reads "128K").
var studySizes = []int64{128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20}

// Preset is a named, built-in sweep.
type Preset struct {
	Name, Help string
	Full       func() Spec
	// Quick is a few cells for demos and CI, the same shape.
	Quick func() Spec
}

func rtts(ms ...int) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		out[i] = time.Duration(m) * time.Millisecond / 2 // one-way delay
	}
	return out
}

// presets: 004 §IV. "we initiate both the paths with 20ms round-trip time
// and 0.1% loss rate ... we increase the RTT to 50ms and in each
// subsequent experiment, we increase it in increments of 50ms, to a
// maximum of 500ms on path 2." and "we initialize both paths with no loss
// and 20ms of RTT. Thereafter, we increment the loss by 0.5% on path 2, to
// a maximum loss rate of 10%. We record measurements for 15% and 20% loss
// rates as well." Path 1 or 2 primary, 100 repetitions per file size,
// MPTCP against single-path TCP. The testbed's links were Gigabit
// Ethernet with no rate set by tc: rate stays unlimited here.
var presets = []Preset{
	{Name: "004-rtt", Help: "study 004 §IV: path 2 RTT 20ms, 50..500ms by 50ms (both paths 0.1% loss), 5 sizes, path 1 or 2 primary, 100 reps, mptcp vs tcp",
		Full: func() Spec {
			p2 := rtts(20)
			for r := 50; r <= 500; r += 50 {
				p2 = append(p2, rtts(r)...)
			}
			return Spec{Name: "004-rtt", Paths: map[string]PathGrid{
				"wlan0": {Delay: rtts(20), Loss: []float64{0.001}},
				"wwan0": {Delay: p2, Loss: []float64{0.001}},
			}, Sizes: studySizes, Transports: []string{"mptcp", "tcp"}, Primaries: []string{"wlan0", "wwan0"}, Reps: 100}
		},
		Quick: func() Spec {
			return Spec{Name: "004-rtt-quick", Paths: map[string]PathGrid{
				"wlan0": {Delay: rtts(20), Loss: []float64{0.001}},
				"wwan0": {Delay: rtts(20, 200, 500), Loss: []float64{0.001}},
			}, Sizes: []int64{128 << 10, 2 << 20}, Transports: []string{"mptcp", "tcp"}, Primaries: []string{"wlan0"}, Reps: 3}
		}},
	{Name: "004-loss", Help: "study 004 §IV: path 2 loss 0..10% by 0.5%, 15%, 20% (both paths 20ms RTT), 5 sizes, path 1 or 2 primary, 100 reps, mptcp vs tcp",
		Full: func() Spec {
			var loss []float64
			for i := 0; i <= 20; i++ {
				loss = append(loss, float64(i)*0.005)
			}
			loss = append(loss, 0.15, 0.20)
			return Spec{Name: "004-loss", Paths: map[string]PathGrid{
				"wlan0": {Delay: rtts(20), Loss: []float64{0}},
				"wwan0": {Delay: rtts(20), Loss: loss},
			}, Sizes: studySizes, Transports: []string{"mptcp", "tcp"}, Primaries: []string{"wlan0", "wwan0"}, Reps: 100}
		},
		Quick: func() Spec {
			return Spec{Name: "004-loss-quick", Paths: map[string]PathGrid{
				"wlan0": {Delay: rtts(20), Loss: []float64{0}},
				"wwan0": {Delay: rtts(20), Loss: []float64{0, 0.05, 0.20}},
			}, Sizes: []int64{128 << 10, 2 << 20}, Transports: []string{"mptcp", "tcp"}, Primaries: []string{"wlan0"}, Reps: 3}
		}},
}

// PresetNames lists the built-in presets.
func PresetNames() []string {
	var out []string
	for _, p := range presets {
		out = append(out, p.Name)
	}
	return out
}

// GetPreset returns a preset's spec (quick: its small variant).
func GetPreset(name string, quick bool) (Spec, error) {
	i := slices.IndexFunc(presets, func(p Preset) bool { return p.Name == name })
	if i < 0 {
		return Spec{}, fmt.Errorf("%w %q (have %s)", ErrUnknownPreset, name, strings.Join(PresetNames(), ", "))
	}
	if quick {
		return presets[i].Quick(), nil
	}
	return presets[i].Full(), nil
}

// PresetHelp is one line per preset for the command's help.
func PresetHelp() string {
	var b strings.Builder
	for _, p := range presets {
		fmt.Fprintf(&b, "  %-9s %s\n", p.Name, p.Help)
	}
	return b.String()
}
