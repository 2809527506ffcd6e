package lab

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mptester/mptester/lab/emu"
)

// Scenario is a named timeline reproducing one cause of 000 Table I or a
// shape of 000 Fig. 5/6 on the lab's Wi-Fi (wlan0) while cellular (wwan0)
// stays as it is. Times leave a few seconds for a test to set up its
// connections and settle.
type Scenario struct {
	Name string `json:"name"`
	Help string `json:"help"`
	// Cause planted for the iOS rules of 000 §II-B (mobile.Cause's
	// values): what a scheduler following them sees first.
	Cause string `json:"cause"`
	// Abrupt: Wi-Fi dies at once, so a handover can only be abrupt
	// (negative duration with the "last received" definition).
	Abrupt bool `json:"abrupt"`
	// KernelLink: down/up also set the client's interface down/up, so the
	// kernel (and mobile mode's path watcher) sees the link go.
	KernelLink bool `json:"kernel_link"`
	// Timeline in the --timeline file syntax.
	Timeline string `json:"timeline"`
}

// The Wi-Fi change of every scenario happens at ScenarioStart.
const ScenarioStart = 4 * time.Second

var scenarios = []Scenario{
	// A sudden jump past the RTO fires a (spurious) RTO: the rise is a
	// ramp slow enough for the RTO to keep ahead of the RTT and for the
	// RTT variance to stay low (srtt crosses 600 ms with RTO < 1.5 s).
	{Name: "wifi-rtt-rise", Cause: "rtt-threshold",
		Help:     "Wi-Fi delay ramps from 10 to 400 ms each way in 10 ms steps every 100 ms (srtt past the 600 ms RTT threshold without RTO), nothing lost",
		Timeline: ramp(ScenarioStart, 20, 400, 10, 100*time.Millisecond)},
	{Name: "wifi-blackhole", Cause: "under-rto", Abrupt: true,
		Help:     "Wi-Fi loses everything both ways while data is pending (RTO with data to send); the link stays up",
		Timeline: "t=4s wlan0 loss=100%"},
	// The RTT rises steeply but smoothly, so the RTO (srtt + the kernel's
	// variance term, RFC 6298 §2) grows faster than srtt and stays ahead
	// of the RTT: 12 steps of 21 ms, one every 83 ms, the slope of the
	// earlier 4 steps of 83 ms every 250 ms. Each of those big steps
	// outran the RTO whenever a connection had no RTT sample since the
	// previous one (they come every 100 ms at best), so whether a
	// spurious RTO fired (cause under-rto) depended on where the sends
	// fell between steps. The RTO passes 1.5 s on the ramp's samples
	// (about 1.9 s in); the 450 ms hold is short enough that the 900 ms
	// RTT samples it brings leave srtt below 600 ms (held 800 ms, srtt
	// passed 600 ms in 9 of 20 lab runs, 0.5 s after the RTO threshold).
	{Name: "wifi-rto-grow", Cause: "rto-threshold",
		Help:     "Wi-Fi delay ramps from 40 to 290 ms each way in 12 steps of 21 ms every 83 ms (the RTO grows faster than srtt and stays ahead of the RTT), jumps to 450 ms (far below the grown RTO: no timeout) and falls back to 100 ms 500 ms later, before srtt reaches 600 ms: the RTO passes 1.5 s meanwhile",
		Timeline: ramp(ScenarioStart, 40, 290, 21, 83*time.Millisecond) + "t=5300ms wlan0 delay=450ms\nt=5800ms wlan0 delay=100ms\n"},
	{Name: "abrupt-linkdown", Cause: "other", Abrupt: true, KernelLink: true,
		Help:     "Wi-Fi link goes down at once (the kernel sees it: carrier and routes gone, the Wi-Fi subflow fails)",
		Timeline: "t=4s wlan0 down"},
	{Name: "fade-recover", Cause: "under-rto",
		Help:     "Wi-Fi loses everything for 3 s, then recovers: the handover comes back to Wi-Fi",
		Timeline: "t=4s wlan0 loss=100%\nt=7s wlan0 loss=0%"},
}

// ramp is timeline lines setting wlan0's delay from fromMs to toMs (one
// way) in steps of stepMs every every, from at.
func ramp(at time.Duration, fromMs, toMs, stepMs int, every time.Duration) string {
	var b strings.Builder
	for d := fromMs; ; d += stepMs {
		d = min(d, toMs)
		fmt.Fprintf(&b, "t=%dms wlan0 delay=%dms\n", at.Milliseconds(), d)
		if d == toMs {
			return b.String()
		}
		at += every
	}
}

// Scenarios lists the named scenarios.
func Scenarios() []Scenario { return slices.Clone(scenarios) }

// ScenarioNames lists their names.
func ScenarioNames() []string {
	var n []string
	for _, s := range scenarios {
		n = append(n, s.Name)
	}
	return n
}

// GetScenario returns the scenario named name and its parsed events.
func GetScenario(name string) (Scenario, []emu.Event, error) {
	for _, s := range scenarios {
		if s.Name == name {
			ev, err := emu.ParseTimeline(strings.NewReader(s.Timeline))
			return s, ev, err
		}
	}
	return Scenario{}, nil, fmt.Errorf("%w: unknown scenario %q (want %s)", ErrNoSuchScenario, name, strings.Join(ScenarioNames(), ", "))
}

// ErrNoSuchScenario: a scenario name the lab does not know.
var ErrNoSuchScenario = fmt.Errorf("no such scenario")

// TimelineTruth is when each step of the lab's latest timeline really
// took effect: the ground truth a handover measurement is compared with.
type TimelineTruth struct {
	Scenario   string    `json:"scenario,omitempty"`
	KernelLink bool      `json:"kernel_link,omitempty"`
	Started    time.Time `json:"started"`
	Steps      []Step    `json:"steps"`
	Done       bool      `json:"done"`
}

// Step is one applied timeline event.
type Step struct {
	At      time.Duration `json:"at_ns"` // planned, since Started
	Path    string        `json:"path"`
	Change  string        `json:"change"`
	Applied time.Time     `json:"applied"` // the emulator's change took effect
	// Kernel: when the client interface's state changed too (KernelLink):
	// just before Applied going down, just after it going up.
	Kernel time.Time `json:"kernel,omitzero"`
	Error  string    `json:"error,omitempty"`
}
