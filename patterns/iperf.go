package patterns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/patterns/wire"
)

func init() { Register(iperfPattern{}) }

// dataFrameLen is the payload of one iperf data frame: large enough that
// the 5-byte header costs nothing, small enough to keep intervals precise.
const dataFrameLen = 64 << 10

var dataFrame = wire.AppendFrame(nil, wire.TypeData, make([]byte, dataFrameLen))

// IperfInterval is one second (000 §II-A "iperf", like iperf3's reports).
type IperfInterval struct {
	Start      time.Duration `json:"start_ns"`
	End        time.Duration `json:"end_ns"`
	Bytes      uint64        `json:"bytes"`
	GoodputBps float64       `json:"goodput_bps"`
	// Retransmissions by the sender during the interval: TCP_INFO
	// total_retrans (MPTCP: summed over subflows) or QUIC packets declared
	// lost. Only the sender's intervals carry them: the client's Intervals
	// of an upload, the server's PeerIntervals of a download.
	Retransmissions *uint64 `json:"retransmissions,omitempty"`
}

// IperfDirection is one direction of the test. Bytes and GoodputBps are the
// receiver's count over the receiver's time (first to last byte), so bytes
// still in a send buffer never count.
type IperfDirection struct {
	Duration   time.Duration `json:"duration_ns"`
	Bytes      uint64        `json:"bytes"`
	GoodputBps float64       `json:"goodput_bps"`
	// Retransmissions by the sender over the test: for an upload the
	// client's connection (sampled when its data ends), for a download the
	// server's side of the connection (server-side sender: the sum of its
	// PeerIntervals, sent in the wire's stats frame; absent from a server
	// that predates it). Retransmissions of the last data still in flight
	// when sending ends are not counted.
	Retransmissions *uint64         `json:"retransmissions,omitempty"`
	Intervals       []IperfInterval `json:"intervals"`      // the client's view (sent for upload, received for download)
	PeerIntervals   []IperfInterval `json:"peer_intervals"` // the server's view
}

// IperfResult holds both directions (the reference app measured only the
// upload; 000 §II-A).
type IperfResult struct {
	Upload   *IperfDirection `json:"upload,omitempty"`
	Download *IperfDirection `json:"download,omitempty"`
}

type iperfPattern struct{}

func (iperfPattern) Name() string { return "iperf" }

// ALPNIperf is the iperf pattern's family: its own ALPN over every
// transport (000 §II: tests are distinguished by ALPN so middleboxes and
// servers can tell them apart).
const ALPNIperf = "mptester-iperf/1"

func (iperfPattern) Family() string { return ALPNIperf }

// openStream dials a connection (or reuses conn) and sends the Hello.
func openStream(ctx context.Context, conn transport.Conn, h wire.Hello) (transport.Stream, *wire.Reader, error) {
	s, err := conn.OpenStream(ctx)
	if err != nil {
		return nil, nil, err
	}
	h.Version = wire.Version
	if err := wire.WriteFrame(s, wire.TypeHello, h.Encode()); err != nil {
		s.Close()
		return nil, nil, err
	}
	return s, wire.NewReader(s, 0), nil
}

func (iperfPattern) Run(ctx context.Context, c *Client) (any, error) {
	res := &IperfResult{}
	dir := c.Params.Direction
	if dir != DirectionDownload {
		up, err := iperfUpload(ctx, c)
		res.Upload = up
		if err != nil {
			return res, fmt.Errorf("upload: %w", err)
		}
	}
	if dir != DirectionUpload {
		down, err := iperfDownload(ctx, c)
		res.Download = down
		if err != nil {
			return res, fmt.Errorf("download: %w", err)
		}
	}
	return res, nil
}

// intervalCounter cuts a byte count into one-second intervals.
type intervalCounter struct {
	start    time.Time
	cur      IperfInterval
	out      []IperfInterval
	sample   func() uint64 // cumulative retransmissions, nil if not tracked
	lastRetr uint64
}

func newIntervalCounter(start time.Time, sample func() uint64) *intervalCounter {
	ic := &intervalCounter{start: start, sample: sample, out: []IperfInterval{}}
	if sample != nil {
		ic.lastRetr = sample()
	}
	return ic
}

func (ic *intervalCounter) add(now time.Time, n uint64) {
	el := now.Sub(ic.start)
	for el >= ic.cur.Start+time.Second {
		ic.close(ic.cur.Start + time.Second)
	}
	ic.cur.Bytes += n
}

func (ic *intervalCounter) close(end time.Duration) {
	iv := ic.cur
	iv.End = end
	if d := (iv.End - iv.Start).Seconds(); d > 0 {
		iv.GoodputBps = float64(iv.Bytes) * 8 / d
	}
	if ic.sample != nil {
		r := ic.sample()
		d := r - ic.lastRetr
		if r < ic.lastRetr { // QUIC's lost count can go down; never report negative
			d = 0
		}
		iv.Retransmissions, ic.lastRetr = &d, r
	}
	ic.out = append(ic.out, iv)
	ic.cur = IperfInterval{Start: end}
}

func (ic *intervalCounter) finish(now time.Time) []IperfInterval {
	if end := now.Sub(ic.start); end > ic.cur.Start {
		ic.close(end)
	}
	return ic.out
}

// retransCounter turns a protocol-state sampler into a cumulative
// retransmission count; nil when there is no sampler or the connection's
// state cannot be read (tcp_info off Linux), so an unknown count is absent
// rather than zero.
func retransCounter(sample func() transport.State) func() uint64 {
	if sample == nil {
		return nil
	}
	st := sample()
	if st.Data == nil {
		return nil
	}
	if u, ok := st.Data.(transport.RetransUnknown); ok && u.RetransmissionsUnknown() {
		return nil
	}
	return func() uint64 { return sample().Retransmissions() }
}

func toIntervals(ws []wire.Interval) []IperfInterval {
	out := make([]IperfInterval, 0, len(ws))
	for _, w := range ws {
		iv := IperfInterval{Start: w.Start, End: w.End, Bytes: w.Bytes}
		if d := (w.End - w.Start).Seconds(); d > 0 {
			iv.GoodputBps = float64(w.Bytes) * 8 / d
		}
		out = append(out, iv)
	}
	return out
}

func iperfUpload(ctx context.Context, c *Client) (*IperfDirection, error) {
	conn, err := c.Dial(ctx, ALPNIperf)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	s, r, err := openStream(ctx, conn, wire.Hello{Kind: wire.KindIperfUpload, Duration: c.Params.Duration})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	d := &IperfDirection{}
	start := time.Now()
	retrans := retransCounter(conn.Sample)
	var retr0 uint64
	if retrans != nil {
		retr0 = retrans()
	}
	ic := newIntervalCounter(start, retrans)
	// The server only speaks during the upload to refuse or to go away;
	// reading all along sees its close at once instead of after a write
	// stall (a closing MPTCP server may keep acknowledging subflow data).
	frames := readFrames(s, r)
	defer frames.stop()
	end := start.Add(c.Params.Duration)
	for now := start; now.Before(end); now = time.Now() {
		if ctx.Err() != nil {
			return d, ctx.Err()
		}
		if frames.spoke.Load() {
			return d, frames.early(ErrServerClosed)
		}
		// A write that makes no progress for stallTimeout means the
		// server is gone (an MPTCP peer that vanished may never reset).
		_ = s.SetDeadline(time.Now().Add(stallTimeout))
		n, err := s.Write(dataFrame)
		ic.add(time.Now(), uint64(max(n-wire.HeaderLen, 0)))
		if err != nil {
			return d, frames.early(err)
		}
	}
	d.Intervals = ic.finish(time.Now())
	if err := wire.WriteFrame(s, wire.TypeDone, nil); err != nil {
		return d, err
	}
	if retrans != nil {
		// An MPTCP subflow that closed takes its count along: never negative.
		total := max(retrans(), retr0) - retr0
		d.Retransmissions = &total
	}
	// The server answers with what it received once it has read everything.
	_ = s.SetDeadline(time.Now().Add(c.Params.Duration + 10*time.Second))
	wait := time.NewTimer(c.Params.Duration + 10*time.Second)
	defer wait.Stop()
	var fr frameResult
	select {
	case fr = <-frames.c:
	case <-wait.C:
		return d, fmt.Errorf("%w: no result from the server", os.ErrDeadlineExceeded)
	}
	if fr.err != nil {
		return d, noEOF(fr.err)
	}
	switch fr.f.Type {
	case wire.TypeResult:
		res, err := wire.DecodeResult(fr.f.Body)
		if err != nil {
			return d, err
		}
		d.Bytes = res.Bytes
		d.PeerIntervals = toIntervals(res.Intervals)
		if n := len(res.Intervals); n > 0 {
			d.Duration = res.Intervals[n-1].End
		}
		if d.Duration > 0 {
			d.GoodputBps = float64(d.Bytes) * 8 / d.Duration.Seconds()
		}
		_ = s.CloseWrite()
		return d, nil
	case wire.TypeError:
		return d, serverError(fr.f.Body)
	default:
		return d, fmt.Errorf("%w: unexpected %s frame", ErrProtocol, fr.f.Type)
	}
}

// frameResult is one frame read from the server, or the read error.
type frameResult struct {
	f   wire.Frame
	err error
}

// frameFeed reads a stream's frames in the background; spoke is set, and
// a blocked write broken, as soon as anything (a frame, EOF, a reset)
// arrives.
type frameFeed struct {
	c     chan frameResult
	done  chan struct{}
	spoke atomic.Bool
}

func readFrames(s transport.Stream, r *wire.Reader) *frameFeed {
	fd := &frameFeed{c: make(chan frameResult, 1), done: make(chan struct{})}
	go func() {
		for {
			f, err := r.ReadFrame()
			f.Body = bytes.Clone(f.Body) // the reader reuses its buffer
			if fd.spoke.CompareAndSwap(false, true) {
				_ = s.SetDeadline(time.Now()) // unblock a write in progress
			}
			select {
			case fd.c <- frameResult{f, err}:
			case <-fd.done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return fd
}

// stop ends the reader once the stream is closed (it may be blocked
// handing over a frame nobody reads).
func (fd *frameFeed) stop() { close(fd.done) }

// early explains why an upload ended before its time: the server's error
// frame if it sent one within a second, else a stream that ended, else
// err.
func (fd *frameFeed) early(err error) error {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case fr := <-fd.c:
		switch {
		case fr.err == nil && fr.f.Type == wire.TypeError:
			return serverError(fr.f.Body)
		case fr.err == nil:
			return fmt.Errorf("%w: unexpected %s frame during the upload", ErrProtocol, fr.f.Type)
		case errors.Is(fr.err, io.EOF):
			return fmt.Errorf("%w: %w", ErrServerClosed, io.ErrUnexpectedEOF)
		default:
			return fr.err
		}
	case <-t.C:
		return err
	}
}

func iperfDownload(ctx context.Context, c *Client) (*IperfDirection, error) {
	conn, err := c.Dial(ctx, ALPNIperf)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	s, r, err := openStream(ctx, conn, wire.Hello{Kind: wire.KindIperfDownload, Duration: c.Params.Duration})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	_ = s.CloseWrite()
	d := &IperfDirection{}
	var ic *intervalCounter
	var first, last time.Time
	for {
		_ = s.SetDeadline(time.Now().Add(stallTimeout))
		f, err := r.ReadFrame()
		if errors.Is(err, io.EOF) && d.PeerIntervals != nil {
			return d, nil // the result was the server's last word
		}
		if err != nil {
			return d, noEOF(err)
		}
		now := time.Now()
		switch f.Type {
		case wire.TypeData:
			if ic == nil {
				// From the first byte's arrival, not the first frame's
				// completion: a 64 KB frame takes a while on a slow path.
				first = r.FrameStart
				ic = newIntervalCounter(first, nil)
			}
			last = now
			d.Bytes += uint64(len(f.Body))
			ic.add(now, uint64(len(f.Body)))
		case wire.TypeDone:
			if ic != nil {
				d.Intervals = ic.finish(last)
				d.Duration = last.Sub(first)
			}
			if d.Duration > 0 {
				d.GoodputBps = float64(d.Bytes) * 8 / d.Duration.Seconds()
			}
		case wire.TypeResult:
			res, err := wire.DecodeResult(f.Body)
			if err != nil {
				return d, err
			}
			d.PeerIntervals = toIntervals(res.Intervals)
			// The server's sender statistics follow; a server that
			// predates them ends the stream here.
		case wire.TypeStats:
			if d.PeerIntervals == nil {
				return d, fmt.Errorf("%w: stats frame before the result", ErrProtocol)
			}
			st, err := wire.DecodeStats(f.Body)
			if err != nil {
				return d, err
			}
			if len(st.Intervals) != len(d.PeerIntervals) {
				return d, fmt.Errorf("%w: stats for %d intervals, result has %d", ErrProtocol, len(st.Intervals), len(d.PeerIntervals))
			}
			d.Retransmissions = &st.Retransmissions
			for i := range st.Intervals {
				d.PeerIntervals[i].Retransmissions = &st.Intervals[i]
			}
			return d, nil
		case wire.TypeError:
			return d, serverError(f.Body)
		default:
			return d, fmt.Errorf("%w: unexpected %s frame", ErrProtocol, f.Type)
		}
	}
}

// stallTimeout bounds a write or read that makes no progress.
const stallTimeout = 5 * time.Second

// noEOF: a stream that ends before the pattern is complete is an error.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: %w", ErrServerClosed, io.ErrUnexpectedEOF)
	}
	return err
}

func serverError(body []byte) error {
	e, err := wire.DecodeError(body)
	if err != nil {
		return err
	}
	return e
}

// Register installs the server side of both directions.
func (iperfPattern) Register(m *Mux) {
	m.HandleStream(wire.KindIperfUpload, ALPNIperf, func(ctx context.Context, s transport.Stream, h wire.Hello, r *wire.Reader) error {
		var ic *intervalCounter
		var total uint64
		var last time.Time
		limit := time.Now().Add(h.Duration + m.Limits.ReadTimeout)
		for {
			if time.Now().After(limit) {
				return &wire.ErrorFrame{Code: wire.CodeLimit, Reason: "upload ran past its announced duration"}
			}
			_ = s.SetDeadline(time.Now().Add(m.Limits.ReadTimeout))
			f, err := r.ReadFrame()
			if err != nil {
				return err
			}
			now := time.Now()
			switch f.Type {
			case wire.TypeData:
				if ic == nil {
					ic = newIntervalCounter(r.FrameStart, nil)
				}
				last = now
				total += uint64(len(f.Body))
				ic.add(now, uint64(len(f.Body)))
			case wire.TypeDone:
				res := wire.Result{Bytes: total}
				if ic != nil {
					for _, iv := range ic.finish(last) {
						res.Intervals = append(res.Intervals, wire.Interval{Start: iv.Start, End: iv.End, Bytes: iv.Bytes})
					}
				}
				if err := wire.WriteFrame(s, wire.TypeResult, wire.EncodeResult(res)); err != nil {
					return err
				}
				return s.CloseWrite()
			default:
				return &wire.ErrorFrame{Code: wire.CodeMalformed, Reason: fmt.Sprintf("unexpected %s frame in iperf upload", f.Type)}
			}
		}
	})
	m.HandleStream(wire.KindIperfDownload, ALPNIperf, func(ctx context.Context, s transport.Stream, h wire.Hello, r *wire.Reader) error {
		// The server is the sender: its own connection's retransmissions
		// are the download's (the client's side sees none of them).
		retrans := retransCounter(connSampler(ctx))
		start := time.Now()
		ic := newIntervalCounter(start, retrans)
		end := start.Add(h.Duration)
		var total uint64
		for now := start; now.Before(end); now = time.Now() {
			if ctx.Err() != nil {
				return &wire.ErrorFrame{Code: wire.CodeShutdown, Reason: "server stopping"}
			}
			_ = s.SetDeadline(time.Now().Add(m.Limits.ReadTimeout))
			n, err := s.Write(dataFrame)
			ic.add(time.Now(), uint64(max(n-wire.HeaderLen, 0)))
			total += uint64(max(n-wire.HeaderLen, 0))
			if err != nil {
				return err
			}
		}
		res := wire.Result{Bytes: total}
		var st *wire.Stats
		if retrans != nil {
			st = &wire.Stats{Intervals: []uint64{}}
		}
		for _, iv := range ic.finish(time.Now()) {
			res.Intervals = append(res.Intervals, wire.Interval{Start: iv.Start, End: iv.End, Bytes: iv.Bytes})
			if st != nil {
				st.Intervals = append(st.Intervals, *iv.Retransmissions)
				st.Retransmissions += *iv.Retransmissions
			}
		}
		if err := wire.WriteFrame(s, wire.TypeDone, nil); err != nil {
			return err
		}
		if err := wire.WriteFrame(s, wire.TypeResult, wire.EncodeResult(res)); err != nil {
			return err
		}
		// After the result, which is where a client that predates stats
		// stops reading.
		if st != nil {
			if err := wire.WriteFrame(s, wire.TypeStats, wire.EncodeStats(*st)); err != nil {
				return err
			}
		}
		return s.CloseWrite()
	})
}
