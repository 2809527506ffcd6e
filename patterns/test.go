package patterns

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/mptester/mptester/patterns/transport"
)

// RecordType is the "type" of a test record in the run envelope.
const RecordType = "pattern_test"

// SampleInterval is the protocol-state sampling period (the 100 ms).
const SampleInterval = 100 * time.Millisecond

// TestConfig is what one test of the matrix runs.
type TestConfig struct {
	Pattern   string `json:"pattern"`
	Transport string `json:"transport"`
	Path      string `json:"path"` // the primary path
	// Paths are every path the test may use, primary first (a multipath
	// transport's test spans them).
	Paths   []PathRole     `json:"paths,omitempty"`
	Family  int            `json:"family"`
	Server  netip.AddrPort `json:"server"`
	Params  Params         `json:"params"`
	Timeout time.Duration  `json:"timeout_ns"`
	// ConnectTimeout bounds each connect and handshake (0: only Timeout).
	ConnectTimeout time.Duration `json:"connect_timeout_ns,omitempty"`
	// ServerResolution: how a server name became Server (nil for an IP literal).
	ServerResolution *ServerResolution `json:"server_resolution,omitempty"`
	// Stop ends the pattern early (Client.Stop).
	Stop <-chan struct{} `json:"-"`
	// StallTimeout ends an HTTP transfer that receives nothing for this
	// long (Client.StallTimeout).
	StallTimeout time.Duration `json:"-"`
}

// PathRole is one path of a test and its role.
type PathRole struct {
	Name string         `json:"name"`
	Role transport.Role `json:"role"`
}

// Sample is one protocol-state sample of one connection, written as
// {"t_ns": ..., "<transport's key>": {...}}.
type Sample struct {
	T time.Duration `json:"t_ns"` // since the test started
	transport.State
}

// MarshalJSON writes the transport's sample under its own key.
func (s Sample) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(struct {
		T   time.Duration `json:"t_ns"`
		Err string        `json:"error,omitempty"`
	}{s.T, s.Err})
	if err != nil || s.Data == nil {
		return b, err
	}
	return withMember(b, s.Key, s.Data)
}

// ConnRecord is one connection of a test and its samples.
type ConnRecord struct {
	transport.Info
	Samples     []Sample `json:"samples"`
	SampleError string   `json:"sample_error,omitempty"`
}

// MarshalJSON adds the transport's connection facts under their key.
func (c ConnRecord) MarshalJSON() ([]byte, error) {
	type plain ConnRecord // drops this method
	return withFact(plain(c), c.Facts)
}

// withFact marshals v and adds the fact under its key.
func withFact(v any, f transport.Fact) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil || f == nil {
		return b, err
	}
	return withMember(b, f.Key(), f)
}

// withMember appends "key": v to the JSON object obj.
func withMember(obj []byte, key string, v any) ([]byte, error) {
	k, err := json.Marshal(key)
	if err != nil {
		return nil, err
	}
	val, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(obj)+len(k)+len(val)+2)
	out = append(out, obj[:len(obj)-1]...)
	if len(obj) > 2 {
		out = append(out, ',')
	}
	out = append(out, k...)
	out = append(out, ':')
	out = append(out, val...)
	return append(out, '}'), nil
}

// PathBytes are the interface counters of one path over the test.
type PathBytes struct {
	Path     string `json:"path"`
	Sent     uint64 `json:"bytes_sent"`
	Received uint64 `json:"bytes_received"`
}

// PathShare is one path's part of a multipath test.
type PathShare struct {
	Path string         `json:"path"` // or the local address when no selected path has it
	Role transport.Role `json:"role,omitempty"`
	// Sent (acked) and received bytes: the last sample of every
	// connection, summed.
	Sent     uint64       `json:"bytes_acked"`
	Received uint64       `json:"bytes_received"`
	Samples  []PathSample `json:"samples"`
}

// PathSample is one sample of one connection's share on a path.
type PathSample struct {
	T        time.Duration `json:"t_ns"`
	Conn     int           `json:"conn"` // index in connections
	Sent     uint64        `json:"bytes_acked"`
	Received uint64        `json:"bytes_received"`
}

// pathShares collects the per-path counters of multipath samples.
func pathShares(conns []ConnRecord, roles []PathRole) []PathShare {
	var out []PathShare
	idx := map[string]int{}
	for ci, c := range conns {
		last := map[string][2]uint64{}
		for _, s := range c.Samples {
			ps, ok := s.Data.(transport.PathSampler)
			if !ok {
				continue
			}
			for _, pc := range ps.PerPath() {
				name := pc.Path
				if name == "" {
					name = pc.Local.Addr().String()
				}
				i, ok := idx[name]
				if !ok {
					i = len(out)
					idx[name] = i
					sh := PathShare{Path: name, Samples: []PathSample{}}
					for _, r := range roles {
						if r.Name == name {
							sh.Role = r.Role
						}
					}
					out = append(out, sh)
				}
				out[i].Samples = append(out[i].Samples, PathSample{T: s.T, Conn: ci, Sent: pc.Sent, Received: pc.Received})
				last[name] = [2]uint64{pc.Sent, pc.Received}
			}
		}
		for name, v := range last {
			out[idx[name]].Sent += v[0]
			out[idx[name]].Received += v[1]
		}
	}
	return out
}

// Record is one test in the run document.
type Record struct {
	Type       string     `json:"type"`
	Index      int        `json:"index"`
	Config     TestConfig `json:"config"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt time.Time  `json:"finished_at"`
	Status     Status     `json:"status"`
	Error      string     `json:"error,omitempty"`
	// Cause names the network's part in the status when a probe after
	// the test showed it (cause.go): udp-blocked:443, udp-interfered:443,
	// v6-blackhole, mptcp-stripped, mptcp-not-offered.
	Cause       string       `json:"cause,omitempty"`
	Invalid     bool         `json:"invalid,omitempty"`
	Result      any          `json:"result"`
	Connections []ConnRecord `json:"connections"`
	PathBytes   []PathBytes  `json:"path_bytes"`
	// PathShares: what each path carried as a multipath transport's own
	// samples say (MPTCP subflows), with a time series.
	PathShares []PathShare `json:"path_shares,omitempty"`
	// Summary is the transport's summary of the connections (MPTCP: was
	// it negotiated, the bytes of each subflow), under its own key.
	Summary transport.Fact `json:"-"`
}

// MarshalJSON adds the transport's summary under its key.
func (r Record) MarshalJSON() ([]byte, error) {
	type plain Record // drops this method
	return withFact(plain(r), r.Summary)
}

// RunTest runs one pattern over one transport and records everything: the
// result, the classified error, protocol-state samples every 100 ms and
// the byte counters of every path in counted. ctx may be cancelled with
// ErrNetworkChanged as cause; the test is then marked invalid.
func RunTest(ctx context.Context, tr transport.Transport, cfg TestConfig, counted []string, log *slog.Logger) Record {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rec := Record{Type: RecordType, Config: cfg, StartedAt: time.Now().UTC(), Connections: []ConnRecord{}, PathBytes: []PathBytes{}}
	p, err := Get(cfg.Pattern)
	if err != nil {
		rec.Status, rec.Error, rec.FinishedAt = StatusUnknownError, err.Error(), time.Now().UTC()
		return rec
	}
	cfg.Params = cfg.Params.WithDefaults(cfg.Pattern)
	rec.Config.Params = cfg.Params
	before := map[string][2]uint64{}
	for _, name := range counted {
		if tx, rx, ok := ifaceCounters(name); ok {
			before[name] = [2]uint64{tx, rx}
		}
	}

	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if cfg.Timeout > 0 {
		var c2 context.CancelFunc
		tctx, c2 = context.WithTimeoutCause(tctx, cfg.Timeout, context.DeadlineExceeded)
		defer c2()
	}
	start := time.Now()
	smp := &sampler{start: start}
	client := &Client{Transport: tr, Addr: cfg.Server, Params: cfg.Params, Logger: log, onNew: smp.add, ConnectTimeout: cfg.ConnectTimeout, Stop: cfg.Stop,
		StallTimeout: cfg.StallTimeout}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(SampleInterval)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tctx.Done():
				// Unblock reads and writes: a dead server or a changed
				// network must end the test, not hang it.
				client.closeAll()
				<-stop
				return
			case <-tick.C:
				smp.sampleAll()
			}
		}
	}()
	result, err := p.Run(tctx, client)
	smp.sampleAll()
	close(stop)
	wg.Wait()
	client.closeAll()
	rec.FinishedAt = time.Now().UTC()
	rec.Result = result
	rec.Status = Classify(tctx, err)
	if err != nil {
		if cause := context.Cause(tctx); cause != nil && rec.Status != StatusProtocolError {
			err = fmt.Errorf("%w (%w)", cause, err)
		}
		rec.Error = err.Error()
	}
	rec.Invalid = rec.Status == StatusNetworkChanged
	rec.Connections = smp.records()
	rec.Summary = summarise(cfg.Transport, rec.Connections)
	rec.PathShares = pathShares(rec.Connections, cfg.Paths)
	for _, name := range counted {
		b, ok := before[name]
		if !ok {
			continue
		}
		if tx, rx, ok := ifaceCounters(name); ok {
			rec.PathBytes = append(rec.PathBytes, PathBytes{Path: name, Sent: tx - b[0], Received: rx - b[1]})
		}
	}
	return rec
}

type sampler struct {
	start time.Time
	mu    sync.Mutex
	conns []transport.Conn
	recs  []*ConnRecord
	dead  []bool
}

func (s *sampler) add(c transport.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns = append(s.conns, c)
	s.recs = append(s.recs, &ConnRecord{Info: c.Info(), Samples: []Sample{}})
	s.dead = append(s.dead, false)
	// The first sample right after setup.
	s.sampleLocked(len(s.conns) - 1)
}

func (s *sampler) sampleAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.conns {
		s.sampleLocked(i)
	}
}

// sampleLocked stops sampling a connection at its first failure: after the
// pattern closed it, its socket is gone and the last good sample stands.
func (s *sampler) sampleLocked(i int) {
	if s.dead[i] {
		return
	}
	st := s.conns[i].Sample()
	if st.Err != "" {
		s.dead[i] = true
		if len(s.recs[i].Samples) == 0 {
			s.recs[i].SampleError = st.Err
		}
		return
	}
	s.recs[i].Samples = append(s.recs[i].Samples, Sample{T: time.Since(s.start), State: st})
}

func (s *sampler) records() []ConnRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ConnRecord, len(s.recs))
	for i, r := range s.recs {
		out[i] = *r
	}
	return out
}

// summarise asks the transport for its summary of the connections.
func summarise(name string, conns []ConnRecord) transport.Fact {
	d, err := transport.Get(name)
	if err != nil || d.Summarise == nil {
		return nil
	}
	cs := make([]transport.ConnSamples, 0, len(conns))
	for _, c := range conns {
		states := make([]transport.State, 0, len(c.Samples))
		for _, s := range c.Samples {
			states = append(states, s.State)
		}
		cs = append(cs, transport.ConnSamples{Info: c.Info, Samples: states})
	}
	return d.Summarise(cs)
}
