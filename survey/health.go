package survey

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mptester/mptester/survey/internal/rawprobe"
)

// health is the prober watching itself: a reply the host lost
// or could not process in time must never make a server look unresponsive.
//
// Loss: every receive-queue drop of a probe socket (SO_RXQ_OVFL, the
// socket's drop counter), of the host's input backlog (softnet_stat), of
// the probe paths' interface queues (a probe dropped on its way out: the
// transmit ring full) and of the IP layer's output (a qdisc drop, which a
// raw socket's sendmsg does not report) is recorded as an interval (after the previous look at the counter, up
// to this look) in which some reply may have been lost. A probe whose
// (send, deadline] window meets such an interval and got no answer is
// suspect: its target is probed again, slower, and marked host_overloaded
// when it cannot be measured cleanly.
//
// Delay: replies are dated by the kernel and a probe's verdict waits until
// its socket's receive loop has read everything that arrived before the
// deadline (rawSock.watermark), so a late receive loop delays verdicts,
// never changes them. The lag, the send schedule's lateness and the host's
// CPU are watched to slow the rate down (AIMD, never above the asked
// rate) before the kernel starts dropping.
//
// Stall: when the whole host stops (a VM descheduled, memory reclaim, a
// machine-wide freeze), the prober cannot tell from its own counters
// whether replies were lost or delayed on their way: in the lab the
// emulator stalls with it and delivers them after the deadline. The host
// counters are read every healthWindow; a read that comes more than
// stallGap after the previous one marks the interval between them like a
// drop, so the silent probes whose deadlines fell in it are probed again.
// Verdicts wait for a read past their deadline (current), so the mark is
// always made before any verdict it concerns.
type health struct {
	asked float64
	lim   *Limiter
	host  hostCounters // nil: none on this OS

	sampleMu sync.Mutex // one host read at a time
	mu       sync.Mutex
	lost     []span    // merged, by start; trimmed to what pending verdicts can meet
	hostLost []span    // the same, without the probe sockets' own drops (for DNS)
	sampled  time.Time // host counters read up to here
	lastRead time.Time // start of the previous read (stall detection)
	hostLast hostSample
	keep     time.Duration // how long a span can still matter

	// Window counters for the rate controller, and run totals.
	winDrops              uint64
	winRecvLag, winSendLg time.Duration
	winFill, maxFill      float64
	timeout               time.Duration // of a probe
	sockDrops, hostDrops  uint64
	ifDrops, outDiscards  uint64
	sendErrs              uint64
	maxRecvLag, maxSendLg time.Duration
	rateMin               float64
	cpuMax                float64
	events                int           // windows judged overloaded
	healthy               time.Duration // since the last overloaded window or raise
	reprobed, marked      int
	dnsRetried, dnsLeft   int // DNS attempts added for host losses; resolutions still suspect after them
	stalls                int // reads that came more than stallGap apart
	maxStall              time.Duration
	winStall              bool
}

type span struct{ from, to time.Time }

// hostCounters reads the host's cumulative input drops and CPU time.
type hostCounters interface {
	sample() (hostSample, bool)
}

type hostSample struct {
	drops      uint64 // input backlog
	ifDrops    uint64 // the probe paths' interface queues
	outDrops   uint64 // IP output discards (qdisc)
	busy, all  uint64 // CPU jiffies
	at         time.Time
	ok, hasCPU bool
}

// Thresholds of the rate controller: a window is overloaded when anything
// was dropped, a probe socket's receive queue was more than overloadFill
// full (drops come next), or the receive loop ran more than half a probe
// timeout late. Lateness alone (the loop's, or the send schedule's past
// overloadLag) is reported, not acted on: on a host loaded by others it
// costs no answer (verdicts wait for the loop) and a lower rate would not
// cure it.
const (
	healthWindow = 100 * time.Millisecond
	overloadLag  = 100 * time.Millisecond
	overloadFill = 0.5
	// stallGap: two reads of the host counters this far apart (they are
	// due every healthWindow) mean the prober did not run in between.
	stallGap      = healthWindow + overloadLag
	rateDecrease  = 0.7  // multiplicative decrease per overloaded window
	rateIncrease  = 0.05 // of the asked rate, per healthy second
	rateFloorFrac = 0.02 // never below this share of the asked rate
)

// newHealth watches a run at asked probes/s (lim's rate) whose probes time
// out after keep, sent through the interfaces ifaces.
func newHealth(asked float64, lim *Limiter, keep time.Duration, ifaces []string) *health {
	h := &health{asked: asked, lim: lim, host: newHostCounters(ifaces), keep: keep + 2*rawprobe.MaxVerdictWait, rateMin: asked, timeout: keep}
	h.sampleHost(time.Now())
	return h
}

// LostDuring records that replies arriving in (from, to] may have been
// dropped by the host (n drops of a socket when sock, else of the host).
func (h *health) LostDuring(from, to time.Time, n uint64, sock bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.winDrops += n
	if sock {
		h.sockDrops += n
		h.lost = h.addSpanLocked(h.lost, span{from, to})
	} else {
		h.hostDrops += n
		h.addHostSpanLocked(span{from, to})
	}
}

// addHostSpanLocked records a drop of the host's (not of a probe socket),
// which may have cost any packet, a DNS query's too.
func (h *health) addHostSpanLocked(s span) {
	h.lost = h.addSpanLocked(h.lost, s)
	h.hostLost = h.addSpanLocked(h.hostLost, s)
}

func (h *health) addSpanLocked(lost []span, s span) []span {
	i, _ := slices.BinarySearchFunc(lost, s.from, func(e span, t time.Time) int { return e.from.Compare(t) })
	lost = slices.Insert(lost, i, s)
	// Merge overlapping neighbours (the list stays sorted and disjoint).
	merged := lost[:0]
	for _, e := range lost {
		if n := len(merged); n > 0 && !e.from.After(merged[n-1].to) {
			if e.to.After(merged[n-1].to) {
				merged[n-1].to = e.to
			}
			continue
		}
		merged = append(merged, e)
	}
	// Spans older than any pending verdict can look at are forgotten, so
	// a long overloaded run keeps a bounded list.
	cut := time.Now().Add(-h.keep)
	j := 0
	for j < len(merged) && merged[j].to.Before(cut) {
		j++
	}
	return merged[j:]
}

// SendFailed records a send the host refused for lack of buffers: the
// probe is suspect like a dropped reply.
func (h *health) SendFailed(at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sendErrs++
	h.winDrops++
	h.lost = h.addSpanLocked(h.lost, span{at.Add(-time.Microsecond), at})
}

// RecvLag and sendLag report how late a receive loop processed a packet
// (processing time minus kernel stamp) and a probe left (send time minus
// its slot in the schedule).
func (h *health) RecvLag(d time.Duration) {
	h.mu.Lock()
	h.winRecvLag = max(h.winRecvLag, d)
	h.maxRecvLag = max(h.maxRecvLag, d)
	h.mu.Unlock()
}

// QueueFill reports how full a probe socket's receive queue is (0..1).
func (h *health) QueueFill(f float64) {
	h.mu.Lock()
	h.winFill = max(h.winFill, f)
	h.maxFill = max(h.maxFill, f)
	h.mu.Unlock()
}

func (h *health) sendLag(d time.Duration) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.winSendLg = max(h.winSendLg, d)
	h.maxSendLg = max(h.maxSendLg, d)
	h.mu.Unlock()
}

// current says whether the host's counters have been read past t, so
// suspect can answer for deadlines up to t without reading them.
func (h *health) current(t time.Time) bool {
	if h == nil || h.host == nil {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.sampled.Before(t)
}

// suspect says whether a reply due in (sent, deadline] may have been lost
// by the host. It first brings the host's counters up to the deadline.
func (h *health) suspect(sent, deadline time.Time) bool {
	return h.suspectIn(false, sent, deadline)
}

// suspectHost is suspect for packets of other sockets than the probes'
// (DNS): only the host's own drops count.
func (h *health) suspectHost(sent, deadline time.Time) bool {
	return h.suspectIn(true, sent, deadline)
}

func (h *health) suspectIn(hostOnly bool, sent, deadline time.Time) bool {
	if h == nil {
		return false
	}
	h.mu.Lock()
	current := !h.sampled.Before(deadline)
	h.mu.Unlock()
	if !current {
		h.sampleHost(time.Now())
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	lost := h.lost
	if hostOnly {
		lost = h.hostLost
	}
	i, _ := slices.BinarySearchFunc(lost, sent, func(e span, t time.Time) int { return e.to.Compare(t) })
	// lost[i] is the first span ending at or after sent.
	for ; i < len(lost); i++ {
		s := lost[i]
		if s.from.Before(deadline) && s.to.After(sent) {
			return true
		}
		if !s.from.Before(deadline) {
			break
		}
	}
	return false
}

// sampleHost reads the host counters, starting at now, recording new
// drops as a span from the previous read's start (a drop just after it
// may have missed it) to the end of this read (a drop during it may be
// counted): a drop is never dated outside its span, even when the
// sampler runs late.
func (h *health) sampleHost(now time.Time) {
	h.sampleMu.Lock()
	defer h.sampleMu.Unlock()
	h.mu.Lock()
	fresh := !h.sampled.Before(now) // another caller read the counters meanwhile
	if !fresh {
		h.stallCheckLocked(now)
		if h.host == nil {
			h.sampled = now
		}
	}
	h.mu.Unlock()
	if fresh || h.host == nil {
		return
	}
	s, ok := h.host.sample()
	h.mu.Lock()
	defer h.mu.Unlock()
	if !ok {
		h.sampled = now
		return
	}
	s.at = now
	end := time.Now()
	if end.Before(now) { // tests pass times ahead of the clock
		end = now
	}
	prev := h.hostLast
	if prev.ok {
		lost := false
		for _, c := range []struct {
			now, was uint64
			total    *uint64
		}{{s.drops, prev.drops, &h.hostDrops}, {s.ifDrops, prev.ifDrops, &h.ifDrops}, {s.outDrops, prev.outDrops, &h.outDiscards}} {
			if c.now > c.was {
				*c.total += c.now - c.was
				h.winDrops += c.now - c.was
				lost = true
			}
		}
		if lost {
			h.addHostSpanLocked(span{prev.at, end})
		}
	}
	if prev.ok && prev.hasCPU && s.hasCPU && s.all > prev.all && now.Sub(prev.at) >= healthWindow/2 {
		h.cpuMax = max(h.cpuMax, 100*float64(s.busy-prev.busy)/float64(s.all-prev.all))
	}
	if !prev.ok || s.at.After(prev.at) {
		h.hostLast = s
	}
	if now.After(h.sampled) {
		h.sampled = now
	}
}

// stallCheckLocked marks (lastRead, now] when the reads of the host
// counters, due every healthWindow, came more than stallGap apart: the
// prober did not run then, and maybe neither did what carries its
// packets.
func (h *health) stallCheckLocked(now time.Time) {
	if !h.lastRead.IsZero() && now.Sub(h.lastRead) > stallGap {
		gap := now.Sub(h.lastRead)
		h.stalls++
		h.maxStall = max(h.maxStall, gap)
		h.winStall = true
		h.addHostSpanLocked(span{h.lastRead, now})
	}
	if now.After(h.lastRead) {
		h.lastRead = now
	}
}

// run samples the host and adapts the rate every healthWindow until ctx ends.
func (h *health) run(ctx context.Context) {
	if h == nil {
		return
	}
	tk := time.NewTicker(healthWindow)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
			h.sampleHost(time.Now()) // not the tick's time: the read may run late
			h.step()
		}
	}
}

// step ends one window: an overloaded one lowers the rate (AIMD), each
// healthy second raises it again towards the asked rate.
func (h *health) step() {
	h.mu.Lock()
	// A stall is reported and acted on (its silent probes are suspect)
	// but lowers no rate: the probes did not cause it.
	late := h.winRecvLag > overloadLag || h.winSendLg > overloadLag || h.winStall
	over := h.winDrops > 0 || h.winFill > overloadFill || (h.timeout > 0 && h.winRecvLag > h.timeout/2)
	h.winDrops, h.winRecvLag, h.winSendLg, h.winFill, h.winStall = 0, 0, 0, 0, false
	if over || late {
		h.events++
	}
	if over {
		h.healthy = 0
	} else {
		h.healthy += healthWindow
	}
	raise := h.healthy >= time.Second
	if raise {
		h.healthy = 0
	}
	h.mu.Unlock()
	if h.asked <= 0 || h.lim == nil {
		return
	}
	rate := h.lim.Rate()
	switch {
	case over:
		rate = max(rate*rateDecrease, h.asked*rateFloorFrac)
	case raise:
		rate = min(rate+h.asked*rateIncrease, h.asked)
	}
	if rate != h.lim.Rate() {
		h.lim.SetRate(rate)
		h.mu.Lock()
		h.rateMin = min(h.rateMin, rate)
		h.mu.Unlock()
	}
}

func (h *health) countReprobe() {
	if h != nil {
		h.mu.Lock()
		h.reprobed++
		h.mu.Unlock()
	}
}

// countDNS counts the attempts a resolution's queries were given because
// the host may have lost an earlier one (retries), and whether one of its
// queries still timed out so (suspect: its timeout may be the host's).
func (h *health) countDNS(retries int, suspect bool) {
	if h == nil || (retries == 0 && !suspect) {
		return
	}
	h.mu.Lock()
	h.dnsRetried += retries
	if suspect {
		h.dnsLeft++
	}
	h.mu.Unlock()
}

func (h *health) countMarked() {
	if h != nil {
		h.mu.Lock()
		h.marked++
		h.mu.Unlock()
	}
}

// degraded reports the run's overload, nil when the host kept up.
func (h *health) degraded() *Degraded {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.events == 0 && h.sockDrops+h.hostDrops+h.ifDrops+h.outDiscards+h.sendErrs == 0 && h.reprobed == 0 && h.marked == 0 && h.dnsRetried == 0 && h.dnsLeft == 0 && h.stalls == 0 {
		return nil
	}
	d := &Degraded{HostOverloaded: h.marked, Reprobed: h.reprobed, SocketDrops: h.sockDrops, HostDrops: h.hostDrops,
		InterfaceDrops: h.ifDrops, OutputDiscards: h.outDiscards,
		SendErrors: h.sendErrs, MaxReceiveLagMs: msOf(h.maxRecvLag), MaxSendLagMs: msOf(h.maxSendLg),
		HostCPUMaxPct: h.cpuMax, MaxQueueFillPct: 100 * h.maxFill, DNSHostRetries: h.dnsRetried, ResolutionsSuspect: h.dnsLeft,
		Stalls: h.stalls, MaxStallMs: msOf(h.maxStall)}
	if h.asked > 0 {
		d.RateAsked, d.RateMin = h.asked, h.rateMin
	}
	var why []string
	if h.sockDrops > 0 {
		why = append(why, fmt.Sprintf("%d replies dropped by the probe sockets' receive queues", h.sockDrops))
	}
	if h.hostDrops > 0 {
		why = append(why, fmt.Sprintf("%d packets dropped by the host's input backlog", h.hostDrops))
	}
	if h.ifDrops > 0 {
		why = append(why, fmt.Sprintf("%d packets dropped by the paths' interface queues", h.ifDrops))
	}
	if h.outDiscards > 0 {
		why = append(why, fmt.Sprintf("%d outgoing packets discarded by the host's IP layer", h.outDiscards))
	}
	if h.sendErrs > 0 {
		why = append(why, fmt.Sprintf("%d sends refused for lack of buffers", h.sendErrs))
	}
	if h.stalls > 0 {
		times := "once"
		if h.stalls > 1 {
			times = fmt.Sprintf("%d times", h.stalls)
		}
		why = append(why, fmt.Sprintf("the prober stalled %s, for up to %v (replies due then may have been lost or delayed)", times, h.maxStall.Round(time.Millisecond)))
	}
	if h.maxRecvLag > overloadLag {
		why = append(why, fmt.Sprintf("replies processed up to %v after arrival", h.maxRecvLag.Round(time.Millisecond)))
	}
	if h.maxFill > overloadFill {
		why = append(why, fmt.Sprintf("a probe socket's receive queue %.0f%% full", 100*h.maxFill))
	}
	if h.maxSendLg > overloadLag {
		why = append(why, fmt.Sprintf("probes sent up to %v behind schedule", h.maxSendLg.Round(time.Millisecond)))
	}
	if h.cpuMax > 0 {
		why = append(why, fmt.Sprintf("host CPU up to %.0f%% busy", h.cpuMax))
	}
	if d.RateMin < d.RateAsked {
		why = append(why, fmt.Sprintf("rate lowered from %.0f/s to %.0f/s", d.RateAsked, d.RateMin))
	}
	outcome := fmt.Sprintf("%d targets probed again", h.reprobed)
	if h.marked > 0 {
		outcome += fmt.Sprintf(", %d marked host_overloaded (not counted unresponsive)", h.marked)
	} else {
		outcome += ", none left unmeasured"
	}
	if h.dnsRetried > 0 {
		outcome += fmt.Sprintf("; %d DNS attempts added: an attempt timed out after the host dropped packets or stalled while its answer was due", h.dnsRetried)
	}
	if h.dnsLeft > 0 {
		outcome += fmt.Sprintf("; %d resolutions timed out with such an attempt still counted (their timeout may be the host's)", h.dnsLeft)
	}
	d.Reason = "host overloaded: " + strings.Join(why, "; ") + "; " + outcome
	return d
}

// Degraded says the host could not keep up during the run, how, and what
// was done about it (Summary.Degraded).
type Degraded struct {
	Reason          string  `json:"reason"`
	HostOverloaded  int     `json:"host_overloaded_targets"` // probe records marked host_overloaded
	Reprobed        int     `json:"reprobed_targets"`
	SocketDrops     uint64  `json:"socket_drops"`
	HostDrops       uint64  `json:"host_drops"`
	InterfaceDrops  uint64  `json:"interface_drops"` // the probe paths' interface queues (transmit ring full, receive ring overrun)
	OutputDiscards  uint64  `json:"output_discards"` // IP output discards (qdisc drops), whole host
	SendErrors      uint64  `json:"send_errors"`
	MaxReceiveLagMs float64 `json:"max_receive_lag_ms"`
	MaxSendLagMs    float64 `json:"max_send_lag_ms"`
	MaxQueueFillPct float64 `json:"max_receive_queue_fill_pct"`
	HostCPUMaxPct   float64 `json:"host_cpu_max_pct"`
	// DNS attempts added because an attempt timed out after the host
	// dropped packets or stalled while its answer was due (each query at
	// most probe.MaxHostRetries), and the resolutions that still timed
	// out with such an attempt counted.
	DNSHostRetries     int `json:"dns_host_retries,omitempty"`
	ResolutionsSuspect int `json:"resolutions_host_suspect,omitempty"`
	// Stalls: intervals longer than stallGap in which the prober did not
	// run (its silent probes then were suspect).
	Stalls     int     `json:"stalls,omitempty"`
	MaxStallMs float64 `json:"max_stall_ms,omitempty"`
	RateAsked  float64 `json:"rate_asked,omitempty"`
	RateMin    float64 `json:"rate_min,omitempty"`
}
