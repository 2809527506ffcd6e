// Package mobile analyses a mobile-mode run (000 §II-A "mobile mode",
// §IV; 002 §3): when a handover transport first used its backup
// (cellular) path, why (000 §II-B, Table I), how long both paths were in
// use (the handover duration of 000 §IV-A), the application delays of the
// interactive streams, and the ratio of MPTCP's maximum delay to another
// transport's (000 Fig. 8). Everything here is a pure function of
// transport.PathState samples and delays, so every handover transport
// (mptcp, quic-handover, mpquic) is analysed by the same code.
package mobile

import (
	"slices"
	"time"

	"github.com/mptester/mptester/patterns/transport"
)

// Thresholds of the iOS interactive-mode scheduler (000 §II-B): the
// cellular backup is used when the Wi-Fi smoothed RTT is above RTT, or
// its RTO above RTO, while the cellular path's is not.
type Thresholds struct {
	RTT time.Duration `json:"rtt_ns"`
	RTO time.Duration `json:"rto_ns"`
}

// DefaultThresholds are the initial values of 000 §II-B.
var DefaultThresholds = Thresholds{RTT: 600 * time.Millisecond, RTO: 1500 * time.Millisecond}

// Cause of the first use of the backup path (000 Table I).
type Cause string

const (
	CauseRTTThreshold Cause = "rtt-threshold" // primary srtt over the RTT threshold, backup's not
	CauseUnderRTO     Cause = "under-rto"     // primary in RTO with data to send
	CauseRTOThreshold Cause = "rto-threshold" // primary RTO over the RTO threshold, backup's not
	CauseOther        Cause = "other"         // none of the three (000: e.g. WifiAssist; here also a primary already gone)
)

// Status of a connection's (or transport's) handover.
type Status string

const (
	StatusHandover   Status = "handover"    // the backup path carried data
	StatusNoHandover Status = "no-handover" // a backup path existed and never carried data
	StatusNoBackup   Status = "no-backup"   // no sample ever showed a backup path
)

// Sample is one 100 ms sample of one connection: T since the test start
// and the connection's paths.
type Sample struct {
	T     time.Duration         `json:"t_ns"`
	Paths []transport.PathState `json:"paths"`
}

// Conn is one connection's sample series.
type Conn []Sample

// Handover is what a transport's connections say about its handover.
type Handover struct {
	Status Status `json:"status"`
	// Primary and Backup name the paths (the first non-backup path seen
	// and the first backup path).
	Primary string `json:"primary,omitempty"`
	Backup  string `json:"backup,omitempty"`
	// FirstBackupData: when data was first sent on the backup path.
	FirstBackupData time.Duration `json:"first_backup_data_ns,omitempty"`
	// LastPrimarySent and LastPrimaryReceived: the two Wi-Fi liveliness
	// ends of 000 §IV-A (last packet sent, last packet received).
	LastPrimarySent     time.Duration `json:"last_primary_sent_ns,omitempty"`
	LastPrimaryReceived time.Duration `json:"last_primary_received_ns,omitempty"`
	// DurationSent and DurationReceived: FirstBackupData minus each
	// liveliness end, negated (000 §IV-A: positive when both paths were
	// in use; negative for an abrupt handover, Wi-Fi dead before cellular
	// was used).
	DurationSent     time.Duration `json:"duration_sent_ns"`
	DurationReceived time.Duration `json:"duration_received_ns"`
	// Cause of the first backup use and the primary's state it was read
	// from.
	Cause        Cause                `json:"cause,omitempty"`
	PrimaryState *transport.PathState `json:"primary_state,omitempty"`
	// RuleAt and Rule: the first sample in which one of the three rules
	// of 000 §II-B held on the primary path, whether or not the transport
	// then used the backup (kernel MPTCP has no RTT or RTO threshold: it
	// moves to a backup only when the primary is in timeout); "" when
	// none ever did.
	RuleAt time.Duration `json:"rule_at_ns,omitempty"`
	Rule   Cause         `json:"rule,omitempty"`
	// Resolution is the sampling interval the times are good to (± half
	// of it each): they are midpoints between the two samples that saw a
	// counter change; 0 from a capture.
	Resolution time.Duration `json:"resolution_ns,omitempty"`
	// Source of the times: SourceSamples or SourceCapture.
	Source string `json:"source"`
}

// Analyse finds a transport's handover from its connections' samples.
// Times come from counter changes between consecutive samples: an event
// seen first in the sample at T after the one at T0 is put at (T0+T)/2.
func Analyse(conns []Conn, th Thresholds) Handover {
	h := Handover{Status: StatusNoBackup, Source: SourceSamples}
	for _, c := range conns {
		for _, s := range c {
			for _, p := range s.Paths {
				switch {
				case p.Backup && h.Backup == "":
					h.Backup = p.Path
				case !p.Backup && h.Primary == "":
					h.Primary = p.Path
				}
			}
		}
	}
	if h.Backup == "" {
		return h
	}
	h.Status = StatusNoHandover
	// A standby transport (quic-handover: one path in use at a time)
	// shows its backup inactive while it is not used; its probes of the
	// standby path are not data, so its first backup data is in a sample
	// where the backup is the path in use. MPTCP's backup subflow is
	// active (established) throughout and carries only data.
	standby := isStandby(conns, h.Backup)
	first, firstConn, firstIdx := time.Duration(-1), -1, -1
	lastSent, lastRecv := time.Duration(-1), time.Duration(-1)
	var gaps []time.Duration
	for _, c := range conns {
		for i := range c {
			if i > 0 {
				gaps = append(gaps, c[i].T-c[i-1].T)
			}
			if r := rule(c[i], h.Primary, h.Backup, th); r != "" && (h.Rule == "" || c[i].T < h.RuleAt) {
				h.Rule, h.RuleAt = r, c[i].T
			}
		}
	}
	if len(gaps) > 0 {
		slices.Sort(gaps)
		h.Resolution = gaps[len(gaps)/2]
	}
	for ci, c := range conns {
		for i := 1; i < len(c); i++ {
			prev, cur := c[i-1], c[i]
			mid := (prev.T + cur.T) / 2
			pb, cb := find(prev, h.Backup), find(cur, h.Backup)
			if cb != nil && cb.Sent > sentOf(pb) && (!standby || cb.Active) && (first < 0 || mid < first) {
				first, firstConn, firstIdx = mid, ci, i
			}
			pp, cp := find(prev, h.Primary), find(cur, h.Primary)
			if cp != nil && cp.Sent > sentOf(pp) && mid > lastSent {
				lastSent = mid
			}
			if cp != nil && cp.Received > recvOf(pp) && mid > lastRecv {
				lastRecv = mid
			}
		}
	}
	if first < 0 {
		return h
	}
	h.Status = StatusHandover
	h.FirstBackupData = first
	h.LastPrimarySent, h.LastPrimaryReceived = max(lastSent, 0), max(lastRecv, 0)
	h.DurationSent = h.LastPrimarySent - first
	h.DurationReceived = h.LastPrimaryReceived - first
	h.Cause, h.PrimaryState = classify(conns[firstConn], firstIdx, h.Primary, h.Backup, th)
	return h
}

// classify applies the rules of 000 §II-B in their order to the primary
// path's state in the last sample before the backup was first used and in
// the sample that saw it (the decision fell between the two).
func classify(c Conn, i int, primary, backup string, th Thresholds) (Cause, *transport.PathState) {
	var seen *transport.PathState
	for _, r := range []Cause{CauseRTTThreshold, CauseUnderRTO, CauseRTOThreshold} {
		for _, j := range []int{i - 1, i} {
			p := find(c[j], primary)
			if p == nil {
				continue
			}
			if seen == nil {
				seen = p
			}
			if holds(r, p, find(c[j], backup), th) {
				return r, p
			}
		}
	}
	return CauseOther, seen
}

// rule is the first of the three rules that holds in sample s ("" none).
func rule(s Sample, primary, backup string, th Thresholds) Cause {
	p := find(s, primary)
	if p == nil {
		return ""
	}
	for _, r := range []Cause{CauseRTTThreshold, CauseUnderRTO, CauseRTOThreshold} {
		if holds(r, p, find(s, backup), th) {
			return r
		}
	}
	return ""
}

// holds says whether rule r of 000 §II-B holds for primary state p with
// backup state b (nil: no backup state in the sample).
func holds(r Cause, p, b *transport.PathState, th Thresholds) bool {
	var bSRTT, bRTO time.Duration
	if b != nil {
		bSRTT, bRTO = b.SRTT, b.RTO
	}
	switch r {
	case CauseRTTThreshold:
		return p.SRTT > th.RTT && bSRTT <= th.RTT
	case CauseUnderRTO:
		// "The timer has fired and no acknowledgment was received since,
		// and the phone wants to push new data": data in flight
		// (interactive sends every 100 ms).
		return p.RTOs > 0 && p.InFlight > 0
	case CauseRTOThreshold:
		return p.RTO > th.RTO && bRTO <= th.RTO
	}
	return false
}

// isStandby says whether the backup path is ever sampled inactive: a
// transport that holds it in standby rather than using it alongside.
func isStandby(conns []Conn, backup string) bool {
	for _, c := range conns {
		for _, s := range c {
			if b := find(s, backup); b != nil && !b.Active {
				return true
			}
		}
	}
	return false
}

func find(s Sample, path string) *transport.PathState {
	for i := range s.Paths {
		if s.Paths[i].Path == path {
			return &s.Paths[i]
		}
	}
	return nil
}

func sentOf(p *transport.PathState) uint64 {
	if p == nil {
		return 0
	}
	return p.Sent
}

func recvOf(p *transport.PathState) uint64 {
	if p == nil {
		return 0
	}
	return p.Received
}

// PathBytes: what each path carried over the connections, from the last
// sample that showed it on each connection (bytes counted by the
// transport, retransmissions included).
type PathBytes struct {
	Path     string `json:"path"`
	Sent     uint64 `json:"bytes_sent"`
	Received uint64 `json:"bytes_received"`
}

// BytesPerPath sums each path's last counters over the connections, in
// order of first appearance.
func BytesPerPath(conns []Conn) []PathBytes {
	var out []PathBytes
	for _, c := range conns {
		last := map[string]transport.PathState{}
		var order []string
		for _, s := range c {
			for _, p := range s.Paths {
				if _, ok := last[p.Path]; !ok {
					order = append(order, p.Path)
				}
				last[p.Path] = p
			}
		}
		for _, name := range order {
			i := slices.IndexFunc(out, func(b PathBytes) bool { return b.Path == name })
			if i < 0 {
				out = append(out, PathBytes{Path: name})
				i = len(out) - 1
			}
			out[i].Sent += last[name].Sent
			out[i].Received += last[name].Received
		}
	}
	return out
}

// Delays summarises the application delays of one direction of the
// interactive pattern (000 §IV-A: the maximum delay seen by the sender).
type Delays struct {
	Count int           `json:"count"`
	Lost  int           `json:"lost"`
	P50   time.Duration `json:"p50_ns"`
	P90   time.Duration `json:"p90_ns"`
	P99   time.Duration `json:"p99_ns"`
	Max   time.Duration `json:"max_ns"`
}

// SummariseDelays: nearest-rank percentiles of the acknowledged chunks'
// delays; lost chunks are counted apart.
func SummariseDelays(ds []time.Duration, lost int) Delays {
	d := Delays{Count: len(ds), Lost: lost}
	if len(ds) == 0 {
		return d
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(p int) time.Duration { return s[max(0, (len(s)*p+99)/100-1)] }
	d.P50, d.P90, d.P99, d.Max = rank(50), rank(90), rank(99), s[len(s)-1]
	return d
}

// Ratio is MPTCP's maximum delay over another transport's, per direction
// (000 Fig. 8); 0 where the other's maximum is 0.
type Ratio struct {
	Other    string  `json:"other"`
	Upload   float64 `json:"upload"`
	Download float64 `json:"download"`
}

// MaxDelayRatio divides the maxima; a direction without delays on either
// side gives 0.
func MaxDelayRatio(other string, mptcpUp, mptcpDown, otherUp, otherDown time.Duration) Ratio {
	div := func(a, b time.Duration) float64 {
		if a <= 0 || b <= 0 {
			return 0
		}
		return float64(a) / float64(b)
	}
	return Ratio{Other: other, Upload: div(mptcpUp, otherUp), Download: div(mptcpDown, otherDown)}
}

// Sources of a handover's times.
const (
	SourceSamples = "samples" // counter changes between 100 ms samples
	SourceCapture = "capture" // packets seen on the interfaces
)

// PathActivity is one transport's packets on one path, from a capture:
// when data first left, and when the last packet (data or ACK) left and
// arrived (zero: never).
type PathActivity struct {
	FirstDataOut time.Time
	LastOut      time.Time
	LastIn       time.Time
}

// AnalyseCapture is Analyse with the times taken from the interfaces
// (000 §IV-A measures them on packets): first data packet sent on the
// backup, last packet sent and received on the primary, relative to
// start. The cause is still read from the samples, around the captured
// first use.
func AnalyseCapture(conns []Conn, th Thresholds, start time.Time, primary, backup PathActivity) Handover {
	h := Analyse(conns, th)
	h.Source = SourceCapture
	if h.Status == StatusNoBackup {
		return h
	}
	sampled, sampledStatus, resolution := h.FirstBackupData, h.Status, h.Resolution
	h.Resolution = 0
	h.Cause, h.PrimaryState = "", nil
	h.FirstBackupData, h.DurationSent, h.DurationReceived = 0, 0, 0
	since := func(t time.Time) time.Duration {
		if t.IsZero() {
			return 0
		}
		return t.Sub(start)
	}
	h.LastPrimarySent, h.LastPrimaryReceived = since(primary.LastOut), since(primary.LastIn)
	standby := isStandby(conns, h.Backup)
	if backup.FirstDataOut.IsZero() || (standby && sampledStatus != StatusHandover) {
		h.Status = StatusNoHandover
		return h
	}
	h.Status = StatusHandover
	h.FirstBackupData = since(backup.FirstDataOut)
	if standby && h.FirstBackupData < sampled-resolution/2 {
		// The capture's first packet on the standby path was a probe (a
		// capture cannot tell QUIC probes from data): the first data is in
		// the sample interval where the backup became the path in use.
		h.FirstBackupData, h.Resolution = sampled, resolution
	}
	h.DurationSent = h.LastPrimarySent - h.FirstBackupData
	h.DurationReceived = h.LastPrimaryReceived - h.FirstBackupData
	// The connection that used the backup: its backup counter rose
	// around the captured first use (interactive over MPTCP has two).
	best, bestIdx := -1, -1
	for ci, c := range conns {
		i := slices.IndexFunc(c, func(s Sample) bool { return s.T >= h.FirstBackupData })
		if i < 1 {
			continue
		}
		rose := sentOf(find(c[min(i+1, len(c)-1)], h.Backup)) > sentOf(find(c[i-1], h.Backup))
		if best < 0 || rose {
			best, bestIdx = ci, i
		}
		if rose {
			break
		}
	}
	if best >= 0 {
		c := conns[best]
		if find(c[bestIdx], h.Primary) == nil && find(c[bestIdx-1], h.Primary) == nil {
			// The primary subflow/path was already gone: none of the
			// three rules (Table I "other").
			h.Cause = CauseOther
			for j := bestIdx - 1; j >= 0 && h.PrimaryState == nil; j-- {
				h.PrimaryState = find(c[j], h.Primary)
			}
		} else {
			h.Cause, h.PrimaryState = classify(c, bestIdx, h.Primary, h.Backup, th)
		}
	}
	if h.Cause == "" {
		h.Cause = CauseOther
	}
	return h
}
