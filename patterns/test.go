package patterns

import (
	"context"
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
	Pattern   string         `json:"pattern"`
	Transport string         `json:"transport"`
	Path      string         `json:"path"`
	Family    int            `json:"family"`
	Server    netip.AddrPort `json:"server"`
	Params    Params         `json:"params"`
	Timeout   time.Duration  `json:"timeout_ns"`
	// ConnectTimeout bounds each connect and handshake (0: only Timeout).
	ConnectTimeout time.Duration `json:"connect_timeout_ns,omitempty"`
	// ServerResolution: how a server name became Server (nil for an IP literal).
	ServerResolution *ServerResolution `json:"server_resolution,omitempty"`
}

// Sample is one protocol-state sample of one connection.
type Sample struct {
	T time.Duration `json:"t_ns"` // since the test started
	transport.State
}

// ConnRecord is one connection of a test and its samples.
type ConnRecord struct {
	transport.Info
	Samples     []Sample `json:"samples"`
	SampleError string   `json:"sample_error,omitempty"`
}

// MPTCPSummary says whether MPTCP was really used (000 §II-B).
type MPTCPSummary struct {
	Negotiated bool `json:"negotiated"`
	// Subflows is the largest number of subflows seen on any connection.
	Subflows int `json:"subflows"`
	// SubflowBytes: bytes acked (sent) and received per subflow, from the
	// last sample of each connection, keyed by local->remote address.
	SubflowBytes []SubflowBytes `json:"subflow_bytes"`
}

// SubflowBytes of one MPTCP subflow.
type SubflowBytes struct {
	Local    netip.AddrPort `json:"local"`
	Remote   netip.AddrPort `json:"remote"`
	Sent     uint64         `json:"bytes_acked"`
	Received uint64         `json:"bytes_received"`
}

// PathBytes are the interface counters of one path over the test.
type PathBytes struct {
	Path     string `json:"path"`
	Sent     uint64 `json:"bytes_sent"`
	Received uint64 `json:"bytes_received"`
}

// Record is one test in the run document.
type Record struct {
	Type        string        `json:"type"`
	Index       int           `json:"index"`
	Config      TestConfig    `json:"config"`
	StartedAt   time.Time     `json:"started_at"`
	FinishedAt  time.Time     `json:"finished_at"`
	Status      Status        `json:"status"`
	Error       string        `json:"error,omitempty"`
	Invalid     bool          `json:"invalid,omitempty"`
	Result      any           `json:"result"`
	Connections []ConnRecord  `json:"connections"`
	MPTCP       *MPTCPSummary `json:"mptcp,omitempty"`
	PathBytes   []PathBytes   `json:"path_bytes"`
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
	client := &Client{Transport: tr, Addr: cfg.Server, Params: cfg.Params, Logger: log, onNew: smp.add, ConnectTimeout: cfg.ConnectTimeout}
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
	rec.MPTCP = mptcpSummary(rec.Connections)
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

func mptcpSummary(conns []ConnRecord) *MPTCPSummary {
	var sum *MPTCPSummary
	for _, c := range conns {
		if c.MPTCP == nil {
			continue
		}
		if sum == nil {
			sum = &MPTCPSummary{Negotiated: true, SubflowBytes: []SubflowBytes{}}
		}
		sum.Negotiated = sum.Negotiated && c.MPTCP.Negotiated
		var last *transport.MPTCPState
		for _, s := range c.Samples {
			if s.MPTCP != nil {
				sum.Subflows = max(sum.Subflows, s.MPTCP.NumSubflow)
				last = s.MPTCP
			}
		}
		if last != nil {
			for _, sf := range last.Subflows {
				sum.SubflowBytes = append(sum.SubflowBytes, SubflowBytes{Local: sf.Local, Remote: sf.Remote, Sent: sf.TCP.BytesAcked, Received: sf.TCP.BytesReceived})
			}
		}
	}
	return sum
}
