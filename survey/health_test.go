package survey

import (
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/report"
)

// TestHealthSuspect: a probe is suspect exactly when the interval in which
// a dropped reply arrived, (from, to], meets the probe's (send, deadline].
func TestHealthSuspect(t *testing.T) {
	h := &health{keep: time.Hour}
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	h.LostDuring(at(100), at(200), 1, true)
	h.LostDuring(at(150), at(250), 2, false) // merges with the first
	h.LostDuring(at(1000), at(1001), 1, true)
	h.sampled = at(5000) // host counters current
	require.Len(t, h.lost, 2)
	for _, c := range []struct {
		sent, deadline int
		want           bool
	}{
		{0, 100, false}, // replies due before the drops began
		{0, 101, true},
		{250, 900, false}, // after the merged span
		{249, 900, true},
		{300, 999, false},
		{300, 1000, false},
		{300, 1001, true},
		{1001, 2000, false},
	} {
		assert.Equal(t, c.want, h.suspect(at(c.sent), at(c.deadline)), "probe (%d, %d] ms", c.sent, c.deadline)
	}
	assert.Equal(t, uint64(2), h.sockDrops)
	assert.Equal(t, uint64(2), h.hostDrops)
	// DNS queries (other sockets) can be lost only by the host's drops.
	assert.True(t, h.suspectHost(at(0), at(200)))
	assert.False(t, h.suspectHost(at(0), at(150)), "only a probe socket dropped then")
	assert.False(t, h.suspectHost(at(300), at(1001)), "only a probe socket dropped then")
}

// TestHealthRate: a window with drops, a receive queue over half full or
// a receive loop late by more than half the probe timeout lowers the rate
// by rateDecrease (never below the floor); lateness alone does not (it is
// reported); each healthy second raises the rate by rateIncrease of the
// asked rate, never above it; the degraded report says all of it.
func TestHealthRate(t *testing.T) {
	lim := NewLimiter(1000, 10)
	h := &health{asked: 1000, lim: lim, keep: time.Hour, rateMin: 1000, timeout: time.Second}
	h.step()
	assert.InDelta(t, 1000, lim.Rate(), 0.01, "healthy: unchanged")
	assert.Nil(t, h.degraded())
	h.RecvLag(2 * overloadLag)
	h.sendLag(time.Second)
	h.step()
	assert.InDelta(t, 1000, lim.Rate(), 0.01, "late only: unchanged")
	h.LostDuring(time.Now(), time.Now(), 3, true)
	h.step()
	assert.InDelta(t, 700, lim.Rate(), 0.01)
	h.RecvLag(600 * time.Millisecond)
	h.step()
	assert.InDelta(t, 490, lim.Rate(), 0.01)
	for range 9 {
		h.step()
	}
	assert.InDelta(t, 490, lim.Rate(), 0.01, "not yet a healthy second")
	h.step()
	assert.InDelta(t, 540, lim.Rate(), 0.01)
	for range 200 {
		h.step()
	}
	assert.InDelta(t, 1000, lim.Rate(), 0.01, "back to the asked rate, not above")
	for range 500 {
		h.QueueFill(0.8)
		h.step()
	}
	assert.InDelta(t, 20, lim.Rate(), 0.01, "floor")
	d := h.degraded()
	require.NotNil(t, d)
	assert.Equal(t, uint64(3), d.SocketDrops)
	assert.InDelta(t, 20, d.RateMin, 0.01)
	for _, w := range []string{"3 replies dropped", "rate lowered from 1000/s to 20/s", "1s behind schedule", "receive queue 80% full", "600ms after arrival"} {
		assert.True(t, strings.Contains(d.Reason, w), "reason %q lacks %q", d.Reason, w)
	}
}

// TestLimiterSetRate: a changed rate applies from the next reservation.
func TestLimiterSetRate(t *testing.T) {
	now := time.Unix(1000, 0)
	l := NewLimiter(100, 1)
	l.now = func() time.Time { return now }
	assert.Equal(t, now, l.Reserve())
	assert.Equal(t, now.Add(10*time.Millisecond), l.Reserve())
	l.SetRate(50)
	assert.Equal(t, now.Add(20*time.Millisecond), l.Reserve())
	assert.Equal(t, now.Add(40*time.Millisecond), l.Reserve())
	assert.InDelta(t, 50, l.Rate(), 1e-9)
}

// overloadProber answers every target but 127.0.0.1 and 127.0.0.4 at
// once; those it leaves unanswered as if the host had lost the replies
// (HostSuspect): 127.0.0.4 only on its first attempt.
type overloadProber struct{ seen4 atomic.Int32 }

func (p *overloadProber) Probe(_ context.Context, t Target) Result {
	switch t.Addr {
	case netip.MustParseAddr("127.0.0.1"):
		return Result{Status: ProbeTimeout, HostSuspect: true, Bytes: 40}
	case netip.MustParseAddr("127.0.0.4"):
		if p.seen4.Add(1) <= 3 { // Count 3: the first attempt
			return Result{Status: ProbeTimeout, HostSuspect: true, Bytes: 40}
		}
	}
	return Result{Kind: AnswerSynAck, RTT: time.Millisecond, Status: ProbeSuccess, Bytes: 40}
}

func (p *overloadProber) Close() error { return nil }

// TestRunHostOverloaded: a target whose probes the host may have lost is
// probed again; still lost after maxReprobes, its record is marked
// host_overloaded, it is counted neither responsive nor unresponsive, and
// the run ends partial with ErrDegraded and the reason. A target answered
// on a later attempt is responsive.
func TestRunHostOverloaded(t *testing.T) {
	pr := &overloadProber{}
	Methods["test-overload"] = func(context.Context, probe.Path, EngineOptions) (Engine, error) { return pr, nil }
	defer delete(Methods, "test-overload")
	dnsAddr := startDNS(t, defaultZone())
	cfg := baseConfig(loopback(t, dnsAddr), 1)
	cfg.Method = "test-overload"
	var out bytes.Buffer
	s, err := runToBuffer(t, context.Background(), cfg, &out)
	require.ErrorIs(t, err, ErrDegraded)
	assert.Equal(t, "partial", s.Status)
	require.NotNil(t, s.Degraded)
	assert.Equal(t, 1, s.Degraded.HostOverloaded)
	assert.Equal(t, 2, s.Degraded.Reprobed)
	assert.Contains(t, err.Error(), s.Degraded.Reason)
	assert.Contains(t, s.Degraded.Reason, "1 marked host_overloaded")
	c := s.Cells[0]
	assert.Equal(t, 104, c.Targets)
	assert.Equal(t, 103, c.Responsive)
	assert.Equal(t, 1, c.HostOverloaded)
	assert.Equal(t, 0, c.Unresponsive)
	assert.Zero(t, c.UnresponsivePct)
	seen := 0
	for _, b := range records(t, out.Bytes())["probe"] {
		var p ProbeRecord
		require.NoError(t, json.Unmarshal(b, &p))
		switch p.Address.String() {
		case "127.0.0.1":
			seen++
			assert.True(t, p.HostOverloaded)
			assert.False(t, p.Responsive)
			assert.Equal(t, maxReprobes, p.Reprobed)
			assert.Equal(t, int64(40*3*(maxReprobes+1)), p.Bytes, "every attempt's bytes")
		case "127.0.0.4":
			seen++
			assert.False(t, p.HostOverloaded)
			assert.True(t, p.Responsive)
			assert.Equal(t, 1, p.Reprobed)
		default:
			assert.False(t, p.HostOverloaded, p.Address)
			assert.Zero(t, p.Reprobed, p.Address)
		}
	}
	assert.Equal(t, 2, seen)
}

// answerAll answers every target at once.
type answerAll struct{}

func (answerAll) Probe(context.Context, Target) Result {
	return Result{Kind: AnswerSynAck, RTT: time.Millisecond, Status: ProbeSuccess, Bytes: 40}
}

func (answerAll) Close() error { return nil }

// TestRunHostRetriedBytes: a query whose attempts the host may have lost
// (the host dropping all along) gets more attempts; they went out on the
// path, so its record counts their bytes and the records add up to
// bytes_sent exactly, as the report's survey-bytes section needs.
func TestRunHostRetriedBytes(t *testing.T) {
	Methods["test-hostdrops"] = func(_ context.Context, _ probe.Path, opts EngineOptions) (Engine, error) {
		now := time.Now()
		opts.Health.LostDuring(now.Add(-time.Minute), now.Add(time.Hour), 1, false) // the host drops all along
		return answerAll{}, nil
	}
	defer delete(Methods, "test-hostdrops")
	dnsAddr := startDNS(t, defaultZone())
	cfg := baseConfig(loopback(t, dnsAddr), 1)
	cfg.Method = "test-hostdrops"
	cfg.Domains = []Domain{{Rank: 1, Name: "open.test"}, {Rank: 2, Name: "hang.test"}}
	var out bytes.Buffer
	s, err := runToBuffer(t, context.Background(), cfg, &out)
	require.ErrorIs(t, err, ErrDegraded)
	require.NotNil(t, s.Degraded)
	assert.Positive(t, s.Degraded.DNSHostRetries)
	assert.Equal(t, 1, s.Degraded.ResolutionsSuspect)
	var sum int64
	for _, b := range records(t, out.Bytes())["resolution"] {
		var rec ResolutionRecord
		require.NoError(t, json.Unmarshal(b, &rec))
		if rec.Domain == "hang.test" {
			require.Len(t, rec.Queries, 1)
			q := rec.Queries[0]
			assert.Positive(t, q.HostRetries)
			assert.Equal(t, cfg.DNSRetries+1+q.HostRetries, q.Attempts, "the counted attempts and the host-lost ones")
			t.Logf("hang.test: %d bytes in %d attempts", rec.Bytes, q.Attempts)
			assert.Zero(t, rec.Bytes%int64(q.Attempts), "every attempt's bytes, each the same query")
			assert.GreaterOrEqual(t, rec.Bytes, int64(q.Attempts)*28, "every attempt's bytes")
		}
		sum += rec.Bytes
	}
	for _, b := range records(t, out.Bytes())["probe"] {
		var rec ProbeRecord
		require.NoError(t, json.Unmarshal(b, &rec))
		sum += rec.Bytes
	}
	assert.Equal(t, s.BytesSent["lo"], sum, "bytes_sent against the records' bytes")
}

// TestResumeProbesOverloadedAgain: a resumed run copies measured probe
// records but probes a host_overloaded one again (its target was never
// measured), counting the bytes it cost.
func TestResumeProbesOverloadedAgain(t *testing.T) {
	r := &runner{cfg: Config{Method: "tcp-syn"}, results: map[string]map[netip.Addr]TargetResult{"lo": {}},
		bytes: map[string]*atomicInt{"lo": new(atomicInt)}, log: discardLogger()}
	h, _ := report.NewHeader("survey", "t", []report.Path(nil), nil)
	var out bytes.Buffer
	st, err := report.NewStream(&out, h)
	require.NoError(t, err)
	r.out = st
	in := `{"type":"header","command":"survey"}
{"type":"probe","probe_path":"lo","address":"127.0.0.1","method":"tcp-syn","responsive":true,"median":1.5,"bytes":100}
{"type":"probe","probe_path":"lo","address":"127.0.0.2","method":"tcp-syn","responsive":false,"host_overloaded":true,"bytes":400}
`
	require.NoError(t, r.resume(strings.NewReader(in)))
	assert.Contains(t, r.results["lo"], netip.MustParseAddr("127.0.0.1"))
	assert.NotContains(t, r.results["lo"], netip.MustParseAddr("127.0.0.2"), "to be probed again")
	assert.Equal(t, int64(500), r.bytes["lo"].Load())
	assert.NotContains(t, out.String(), "127.0.0.2")
}

// fakeHost returns the samples it is given, one per read.
type fakeHost struct{ s []hostSample }

func (f *fakeHost) sample() (hostSample, bool) {
	s := f.s[0]
	if len(f.s) > 1 {
		f.s = f.s[1:]
	}
	return s, true
}

// TestHealthHostDrops: drops of the host's input backlog, of the probe
// paths' interface queues and of IP output between two reads of the host
// counters make every probe whose window meets the interval between the
// reads suspect, and the report names each kind with its count.
func TestHealthHostDrops(t *testing.T) {
	h := &health{keep: time.Hour, host: &fakeHost{s: []hostSample{
		{ok: true},
		{ok: true, drops: 1, ifDrops: 5, outDrops: 2},
		{ok: true, drops: 1, ifDrops: 5, outDrops: 2},
	}}}
	t0 := time.Now()
	h.sampleHost(t0)
	h.sampleHost(t0.Add(100 * time.Millisecond)) // the drops happened in (t0, t0+100ms]
	h.sampleHost(t0.Add(200 * time.Millisecond))
	assert.True(t, h.suspect(t0.Add(50*time.Millisecond), t0.Add(60*time.Millisecond)))
	assert.True(t, h.suspectHost(t0.Add(50*time.Millisecond), t0.Add(60*time.Millisecond)))
	assert.False(t, h.suspect(t0.Add(100*time.Millisecond), t0.Add(200*time.Millisecond)))
	d := h.degraded()
	require.NotNil(t, d)
	assert.Equal(t, uint64(1), d.HostDrops)
	assert.Equal(t, uint64(5), d.InterfaceDrops)
	assert.Equal(t, uint64(2), d.OutputDiscards)
	assert.Contains(t, d.Reason, "5 packets dropped by the paths' interface queues")
	assert.Contains(t, d.Reason, "2 outgoing packets discarded by the host's IP layer")
}

// TestHealthStall: two reads of the host counters more than stallGap
// apart mean the prober did not run in between; a silent probe whose
// (send, deadline] meets that interval is suspect (DNS queries too), the
// rate is not lowered and the report says how long the prober stalled.
// The same without host counters (other OSes).
func TestHealthStall(t *testing.T) {
	for _, host := range []hostCounters{&fakeHost{s: []hostSample{{ok: true}}}, nil} {
		lim := NewLimiter(1000, 10)
		h := &health{asked: 1000, lim: lim, keep: time.Hour, rateMin: 1000, timeout: time.Second, host: host}
		t0 := time.Now()
		at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
		for ms := 0; ms <= 500; ms += 100 {
			h.sampleHost(at(ms))
		}
		h.step()
		assert.Nil(t, h.degraded(), "reads every healthWindow: no stall")
		h.sampleHost(at(500 + int(stallGap/time.Millisecond))) // just within
		assert.Nil(t, h.degraded(), "a read stallGap late is not a stall")
		h.sampleHost(at(1900)) // 1.2 s after the previous read
		h.sampleHost(at(2000))
		for _, c := range []struct {
			sent, deadline int
			want           bool
		}{
			{0, 700, false}, // deadline at the stall's start
			{0, 701, true},
			{1500, 1600, true},
			{1899, 2899, true},
			{1900, 2900, false}, // sent once the prober ran again
		} {
			assert.Equal(t, c.want, h.suspect(at(c.sent), at(c.deadline)), "probe (%d, %d] ms", c.sent, c.deadline)
			assert.Equal(t, c.want, h.suspectHost(at(c.sent), at(c.deadline)), "query (%d, %d] ms", c.sent, c.deadline)
		}
		h.step()
		assert.InDelta(t, 1000, lim.Rate(), 0.01, "a stall is not the probes' doing: rate unchanged")
		d := h.degraded()
		require.NotNil(t, d)
		assert.Equal(t, 1, d.Stalls)
		assert.InDelta(t, 1200, d.MaxStallMs, 0.01)
		assert.Contains(t, d.Reason, "the prober stalled once, for up to 1.2s")
		assert.Equal(t, 1, h.events)
	}
}
