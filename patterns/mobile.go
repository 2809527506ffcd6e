package patterns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/mptester/mptester/capture"
	"github.com/mptester/mptester/patterns/mobile"
	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/probe"
)

// MobileRecordType is the "type" of a mobile run's summary record.
const MobileRecordType = "mobile_summary"

// MobileOptions of a mobile-mode run (000 §II-A "mobile mode").
type MobileOptions struct {
	// Duration is the longest the interactive streams run (the server
	// caps it at its MaxDuration, 60 s by default).
	Duration time.Duration
	// Grace: how long the streams go on after the primary path is lost
	// (the backup carries them, or does not).
	Grace time.Duration
	// Thresholds of the Table I classification (000 §II-B).
	Thresholds mobile.Thresholds `json:"thresholds"`
	// Capture the test flows on the paths (AF_PACKET): handover times and
	// bytes per interface then come from the packets, not the samples.
	Capture bool `json:"capture"`
	// PcapDir, with Capture, receives IFACE.pcap per path.
	PcapDir string `json:"pcap_dir,omitempty"`
}

// Mobile defaults.
const (
	DefaultMobileDuration = 60 * time.Second
	DefaultMobileGrace    = 5 * time.Second
)

// Ends of a mobile run.
const (
	MobileEndPrimaryLost = "primary-lost" // the primary path was lost, then the grace time passed
	MobileEndDuration    = "duration"     // --duration passed first
	MobileEndCancelled   = "cancelled"
)

// ErrPrimaryLost is the cause of a mobile test cut short because its
// streams did not end within the grace time after the primary path was
// lost (a transport without a working backup).
var ErrPrimaryLost = errors.New("primary path lost and the streams did not end within the grace time")

// MobileRecord is a mobile run's summary: one handover analysis per
// handover transport, side by side, and MPTCP's max-delay ratio to each
// other one (000 Fig. 8).
type MobileRecord struct {
	Type    string `json:"type"`
	Primary string `json:"primary"`
	// Backup is "" when no path was a backup (every transport's handover
	// status is then no-backup).
	Backup      string            `json:"backup"`
	Family      int               `json:"family"`
	Server      string            `json:"server"`
	Ended       string            `json:"ended"`
	PrimaryLost *PrimaryLoss      `json:"primary_lost,omitempty"`
	Thresholds  mobile.Thresholds `json:"thresholds"`
	Transports  []MobileTransport `json:"transports"`
	Ratios      []mobile.Ratio    `json:"mptcp_max_delay_ratios"`
	// InterfaceBytes: the kernel's counters of each path over the whole
	// run (all transports together, other traffic included).
	InterfaceBytes []PathBytes `json:"interface_bytes"`
	// Capture: what the capture saw per interface (packets, drops, pcap
	// files); nil without one.
	Capture []capture.IfaceStats `json:"capture,omitempty"`
}

// PrimaryLoss is when the kernel said the primary path was gone.
type PrimaryLoss struct {
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}

// MobileTransport is one transport's part of a mobile run.
type MobileTransport struct {
	Transport string    `json:"transport"`
	Index     int       `json:"index"` // its pattern_test record
	StartedAt time.Time `json:"started_at"`
	Status    Status    `json:"status"`
	Error     string    `json:"error,omitempty"`
	// Handover times are since StartedAt.
	Handover  mobile.Handover    `json:"handover"`
	Upload    mobile.Delays      `json:"upload_delays"`
	Download  mobile.Delays      `json:"download_delays"`
	PathBytes []mobile.PathBytes `json:"path_bytes"`
	// CapturedBytes: the IP bytes of the transport's packets on each path,
	// from the capture (none without one).
	CapturedBytes []PathBytes `json:"captured_bytes,omitempty"`
	// PathStates: every connection's 100 ms samples of its paths.
	PathStates []mobile.Conn `json:"path_states"`
}

// HandoverTransports are the registered transports mobile mode runs.
func HandoverTransports() []string {
	var out []string
	for _, d := range transport.All() {
		if d.Handover {
			out = append(out, d.Name)
		}
	}
	return out
}

// RunMobile runs the interactive pattern over every handover transport of
// o.Transports (all of them when empty) at the same time, each with its
// own connections and counters, from the start until the primary path is
// lost plus the grace time, or the duration; then analyses each (package
// mobile). Test records and the summary go to o.Emit.
func RunMobile(ctx context.Context, o RunOptions, m MobileOptions) (MobileRecord, error) {
	rec := MobileRecord{Type: MobileRecordType, Thresholds: m.Thresholds, Transports: []MobileTransport{}, Ratios: []mobile.Ratio{}, InterfaceBytes: []PathBytes{}}
	if m.Duration <= 0 {
		m.Duration = DefaultMobileDuration
	}
	if m.Grace <= 0 {
		m.Grace = DefaultMobileGrace
	}
	if m.Thresholds == (mobile.Thresholds{}) {
		m.Thresholds = mobile.DefaultThresholds
		rec.Thresholds = m.Thresholds
	}
	if o.Emit == nil {
		o.Emit = func(any) error { return nil }
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if len(o.Paths) == 0 || len(o.Families) == 0 || len(o.Servers) == 0 {
		return rec, errors.New("mobile: need a server, a path and a family")
	}
	names := o.Transports
	if len(names) == 0 {
		names = HandoverTransports()
	}
	for _, n := range names {
		d, err := transport.Get(n)
		if err != nil {
			return rec, err
		}
		if !d.Handover {
			return rec, fmt.Errorf("mobile: transport %s does not keep a connection across a path loss (want one of %v)", n, HandoverTransports())
		}
	}
	sv, err := resolveAndSelect(ctx, o)
	if err != nil {
		return rec, err
	}
	primary := primaryOf(o, o.Paths)
	var span []probe.Path
	for _, p := range o.Paths {
		if p.Name == primary.Name || slices.Contains(o.Backup, p.Name) {
			span = append(span, p)
		}
	}
	paths := roles(o, primary, span)
	rec.Primary, rec.Server = primary.Name, sv.name
	for _, p := range paths {
		if p.Role == transport.RoleBackup && rec.Backup == "" {
			rec.Backup = p.Name
		}
	}
	var f probe.Family
	var ip netip.Addr
	for _, fam := range o.Families {
		a, ok := sv.addr(primary, fam)
		if _, has := primary.SourceAddr(fam); ok && has {
			f, ip = fam, a
			break
		}
	}
	if f == 0 {
		return rec, fmt.Errorf("mobile: the primary path %s has no address of a family the server has", primary.Name)
	}
	rec.Family = int(f)
	params := o.Params
	params.Duration = m.Duration
	if params.AckGrace == 0 {
		// Chunks queued behind a dead or slow primary get the grace time
		// to arrive before they count as lost.
		params.AckGrace = m.Grace
	}
	params = params.WithDefaults("interactive")

	before := map[string][2]uint64{}
	for _, p := range paths {
		if tx, rx, ok := ifaceCounters(p.Name); ok {
			before[p.Name] = [2]uint64{tx, rx}
		}
	}
	flows := map[string]capture.Flow{}
	var capt *capture.Capture
	if m.Capture {
		var ifaces []string
		for _, p := range paths {
			ifaces = append(ifaces, p.Name)
		}
		var fl []capture.Flow
		for _, n := range names {
			d, _ := transport.Get(n)
			flows[n] = capture.Flow{Proto: d.Network, Server: netip.AddrPortFrom(ip, sv.portFor(o, n))}
			fl = append(fl, flows[n])
		}
		var err error
		if capt, err = capture.Start(ctx, capture.Options{Ifaces: ifaces, Flows: fl, PcapDir: m.PcapDir}); err != nil {
			return rec, err
		}
	}
	runCtx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	stop := make(chan struct{})
	var stopOnce sync.Once
	lost := make(chan PrimaryLoss, 1)
	if o.Discover != nil {
		go func() {
			if l, ok := watchPrimary(runCtx, o, primary.Name); ok {
				lost <- l
			}
		}()
	}
	var lossMu sync.Mutex
	go func() {
		select {
		case <-runCtx.Done():
			return
		case l := <-lost:
			lossMu.Lock()
			rec.PrimaryLost = &l
			lossMu.Unlock()
			o.Logger.Info("primary path lost", "path", primary.Name, "reason", l.Reason, "grace", m.Grace)
			t := time.NewTimer(m.Grace)
			defer t.Stop()
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
			}
			stopOnce.Do(func() { close(stop) })
			// Streams stuck on a dead path end now, not at their deadline.
			t.Reset(params.AckGrace + 3*time.Second)
			select {
			case <-runCtx.Done():
			case <-t.C:
				cancelRun(ErrPrimaryLost)
			}
		}
	}()

	recs := make([]Record, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := TestConfig{Pattern: "interactive", Transport: n, Path: primary.Name, Paths: configPaths(paths), Family: int(f),
				Server: netip.AddrPortFrom(ip, sv.portFor(o, n)), Params: params, Timeout: DefaultTimeout("interactive", params),
				ConnectTimeout: o.ConnectTimeout, ServerResolution: sv.resolution(primary, f), Stop: stop}
			tr, err := newTransport(o, sv, n, paths, f)
			if err != nil {
				now := time.Now().UTC()
				recs[i] = Record{Type: RecordType, Config: cfg, StartedAt: now, FinishedAt: now, Status: Classify(runCtx, err),
					Error: err.Error(), Connections: []ConnRecord{}, PathBytes: []PathBytes{}}
				return
			}
			recs[i] = RunTest(runCtx, tr, cfg, nil, o.Logger)
		}()
	}
	wg.Wait()
	lossMu.Lock()
	switch {
	case rec.PrimaryLost != nil:
		rec.Ended = MobileEndPrimaryLost
	case ctx.Err() != nil:
		rec.Ended = MobileEndCancelled
	default:
		rec.Ended = MobileEndDuration
	}
	lossMu.Unlock()
	cancelRun(nil)
	var captured *capture.Result
	if capt != nil {
		// The connections' last packets (close alerts, DATA_FIN, FINs
		// of every subflow) are in: ~200 ms in the lab.
		time.Sleep(time.Second)
		r := capt.Stop()
		captured, rec.Capture = &r, r.Ifaces
	}
	for _, p := range paths {
		b, ok := before[p.Name]
		if tx, rx, ok2 := ifaceCounters(p.Name); ok && ok2 {
			rec.InterfaceBytes = append(rec.InterfaceBytes, PathBytes{Path: p.Name, Sent: tx - b[0], Received: rx - b[1]})
		}
	}
	for i := range recs {
		// No o.Check: its path check after the test would flag the
		// primary path that is meant to go away; run checks before.
		recs[i].Index = i
		if err := o.Emit(recs[i]); err != nil {
			return rec, err
		}
		mt := analyseMobile(recs[i], m.Thresholds)
		if captured != nil {
			f := flows[mt.Transport]
			act := func(path string) mobile.PathActivity {
				a := captured.Of(path, f)
				return mobile.PathActivity{FirstDataOut: a.FirstDataOut, LastOut: a.LastOut, LastIn: a.LastIn}
			}
			mt.Handover = mobile.AnalyseCapture(mt.PathStates, m.Thresholds, mt.StartedAt, act(rec.Primary), act(rec.Backup))
			for _, p := range paths {
				a := captured.Of(p.Name, f)
				mt.CapturedBytes = append(mt.CapturedBytes, PathBytes{Path: p.Name, Sent: a.BytesOut, Received: a.BytesIn})
			}
		}
		rec.Transports = append(rec.Transports, mt)
	}
	rec.Ratios = ratios(rec.Transports)
	if err := o.Emit(rec); err != nil {
		return rec, err
	}
	if ctx.Err() != nil {
		return rec, ctx.Err()
	}
	return rec, nil
}

// analyseMobile turns a transport's test record into its mobile summary.
func analyseMobile(r Record, th mobile.Thresholds) MobileTransport {
	mt := MobileTransport{Transport: r.Config.Transport, Index: r.Index, StartedAt: r.StartedAt, Status: r.Status, Error: r.Error,
		PathStates: []mobile.Conn{}}
	for _, c := range r.Connections {
		conn := mobile.Conn{}
		for _, s := range c.Samples {
			if ps, ok := s.Data.(transport.PathStater); ok {
				conn = append(conn, mobile.Sample{T: s.T, Paths: ps.PathStates()})
			}
		}
		mt.PathStates = append(mt.PathStates, conn)
	}
	mt.Handover = mobile.Analyse(mt.PathStates, th)
	mt.PathBytes = mobile.BytesPerPath(mt.PathStates)
	if ir, ok := r.Result.(*InteractiveResult); ok {
		if d := ir.Upload; d != nil {
			mt.Upload = mobile.SummariseDelays(d.Delays, len(d.Lost))
		}
		if d := ir.Download; d != nil {
			mt.Download = mobile.SummariseDelays(d.Delays, len(d.Lost))
		}
	}
	return mt
}

// ratios: MPTCP's maximum delays over each other transport's (000 Fig. 8).
func ratios(ts []MobileTransport) []mobile.Ratio {
	out := []mobile.Ratio{}
	i := slices.IndexFunc(ts, func(t MobileTransport) bool { return t.Transport == "mptcp" })
	if i < 0 {
		return out
	}
	for _, t := range ts {
		if t.Transport != "mptcp" {
			out = append(out, mobile.MaxDelayRatio(t.Transport, ts[i].Upload.Max, ts[i].Download.Max, t.Upload.Max, t.Download.Max))
		}
	}
	return out
}

// watchPrimary waits until the kernel says the primary path is lost: its
// link went down, it disappeared, its addresses changed, or it lost its
// default route (000 §II-A: the test completes when the OS tears the Wi-Fi
// down). It re-discovers on each notification and on a safety tick.
func watchPrimary(ctx context.Context, o RunOptions, name string) (PrimaryLoss, bool) {
	initial := o.Paths
	if ps, err := o.Discover(ctx); err == nil {
		initial = ps
	}
	var loss PrimaryLoss
	var found bool
	probe.Watch(ctx, o.PollEvery, 500*time.Millisecond, func(at time.Time) bool {
		ps, err := o.Discover(ctx)
		if err != nil {
			return true
		}
		if ch := probe.PathChanges(initial, ps, []string{name}, false); len(ch) > 0 {
			loss, found = PrimaryLoss{At: at, Reason: ch[0].Reason}, true
			return false
		}
		b, errB := probe.FindPath(initial, name)
		a, errA := probe.FindPath(ps, name)
		if errB == nil && errA == nil && b.DefaultRoute && !a.DefaultRoute {
			loss, found = PrimaryLoss{At: at, Reason: "default route gone"}, true
			return false
		}
		return true
	})
	return loss, found
}
