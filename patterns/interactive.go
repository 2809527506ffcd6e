package patterns

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/patterns/wire"
)

func init() { Register(interactivePattern{}) }

// InteractiveDirection holds the chunk->ack delays measured by the sender
// of one direction (000 §II-A "interactive", 002 §2).
type InteractiveDirection struct {
	Sent   int             `json:"sent"`
	Acked  int             `json:"acked"`
	Lost   []uint32        `json:"lost_seqs"` // never acknowledged within the grace time
	Delays []time.Duration `json:"delays_ns"` // in sequence order, acked chunks only
	Median time.Duration   `json:"median_ns"`
	P95    time.Duration   `json:"p95_ns"`
	// Max is the maximum application delay of 000 §IV-A.
	Max time.Duration `json:"max_ns"`
}

// InteractiveResult: Upload is measured by the client, Download by the
// server and reported back over the download stream.
type InteractiveResult struct {
	Streams  string                `json:"streams"` // "two-connections" (TCP) or "one-connection-two-streams" (QUIC)
	Upload   *InteractiveDirection `json:"upload,omitempty"`
	Download *InteractiveDirection `json:"download,omitempty"`
}

type interactivePattern struct{}

func (interactivePattern) Name() string { return "interactive" }

// ALPNInteractive is the interactive pattern's family.
const ALPNInteractive = "mptester-interactive/1"

func (interactivePattern) Family() string { return ALPNInteractive }

func summarize(ds []wire.Delay) *InteractiveDirection {
	d := &InteractiveDirection{Sent: len(ds), Lost: []uint32{}, Delays: []time.Duration{}}
	slices.SortFunc(ds, func(a, b wire.Delay) int { return int(a.Seq) - int(b.Seq) })
	for _, x := range ds {
		if x.Lost {
			d.Lost = append(d.Lost, x.Seq)
			continue
		}
		d.Acked++
		d.Delays = append(d.Delays, x.Delay)
	}
	d.Median = Median(d.Delays)
	if len(d.Delays) > 0 {
		s := slices.Clone(d.Delays)
		slices.Sort(s)
		d.Max = s[len(s)-1]
		d.P95 = s[min(len(s)-1, (len(s)*95+99)/100-1)]
	}
	return d
}

// chunkSender sends a chunk every interval for duration and times the acks
// that the peer's reader delivers via ack(). Used by both sides.
type chunkSender struct {
	mu      sync.Mutex
	sentAt  map[uint32]time.Time
	delays  map[uint32]time.Duration
	pending int
	allIn   chan struct{}
	done    bool
}

// readAcks times the peer's acks in the background until the stream ends or
// a frame is wrong; that error (never nil) arrives on the channel. onOther
// turns a frame that is not an ack, and onBad a bad ack, into the error.
// onDone, when set, is called for a Done frame (the receiver asks the
// sender to stop early: mobile mode ends when the primary path is lost)
// and the acks read on. Client (upload) and server (download) senders
// share it.
func (cs *chunkSender) readAcks(r *wire.Reader, onOther func(wire.Frame) error, onBad func(error) error, onDone func()) <-chan error {
	errc := make(chan error, 1)
	go func() {
		for {
			f, err := r.ReadFrame()
			if err != nil {
				errc <- err
				return
			}
			if f.Type == wire.TypeDone && onDone != nil {
				onDone()
				continue
			}
			if f.Type != wire.TypeAck {
				errc <- onOther(f)
				return
			}
			seq, err := wire.DecodeAck(f.Body)
			if err == nil {
				err = cs.ack(seq, time.Now())
			}
			if err != nil {
				errc <- onBad(err)
				return
			}
		}
	}()
	return errc
}

func newChunkSender() *chunkSender {
	return &chunkSender{sentAt: map[uint32]time.Time{}, delays: map[uint32]time.Duration{}, allIn: make(chan struct{})}
}

func (cs *chunkSender) ack(seq uint32, now time.Time) error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	t, ok := cs.sentAt[seq]
	if !ok {
		return fmt.Errorf("%w: ack of unsent chunk %d", ErrProtocol, seq)
	}
	if _, dup := cs.delays[seq]; dup {
		return fmt.Errorf("%w: duplicate ack of chunk %d", ErrProtocol, seq)
	}
	cs.delays[seq] = now.Sub(t)
	cs.pending--
	if cs.done && cs.pending == 0 {
		close(cs.allIn)
	}
	return nil
}

// run sends chunk k at start + k*interval for k*interval < duration
// (duration/interval chunks, a late chunk leaves at once rather than being
// skipped), or until stop is closed; it returns when the last one is
// written.
func (cs *chunkSender) run(ctx context.Context, s transport.Stream, size int, interval, duration time.Duration, stop <-chan struct{}) error {
	start := time.Now()
	buf := make([]byte, 0, wire.HeaderLen+size)
	timer := time.NewTimer(0)
	defer timer.Stop()
send:
	for seq := uint32(0); time.Duration(seq)*interval < duration; seq++ {
		if wait := time.Until(start.Add(time.Duration(seq) * interval)); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-stop:
				break send
			case <-timer.C:
			}
		}
		select {
		case <-stop:
			break send
		default:
		}
		buf = wire.AppendChunk(buf[:0], seq, size)
		cs.mu.Lock()
		cs.sentAt[seq] = time.Now()
		cs.pending++
		cs.mu.Unlock()
		if _, err := s.Write(buf); err != nil {
			return err
		}
	}
	cs.mu.Lock()
	cs.done = true
	if cs.pending == 0 {
		close(cs.allIn)
	}
	cs.mu.Unlock()
	return nil
}

// wait for the outstanding acks up to grace, then return every delay,
// marking unacknowledged chunks lost.
func (cs *chunkSender) wait(ctx context.Context, grace time.Duration) []wire.Delay {
	select {
	case <-cs.allIn:
	case <-time.After(grace):
	case <-ctx.Done():
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	out := make([]wire.Delay, 0, len(cs.sentAt))
	for seq := range cs.sentAt {
		d, ok := cs.delays[seq]
		out = append(out, wire.Delay{Seq: seq, Delay: d, Lost: !ok})
	}
	return out
}

func (interactivePattern) Run(ctx context.Context, c *Client) (any, error) {
	p := c.Params
	res := &InteractiveResult{}
	upConn, err := c.Dial(ctx, ALPNInteractive)
	if err != nil {
		return res, err
	}
	defer upConn.Close()
	// Over TCP each direction has its own connection so a loss on one does
	// not block the other (head-of-line); QUIC streams are independent.
	downConn := upConn
	res.Streams = "one-connection-two-streams"
	if !upConn.MultiStream() {
		res.Streams = "two-connections"
		if downConn, err = c.Dial(ctx, ALPNInteractive); err != nil {
			return res, err
		}
		defer downConn.Close()
	}
	h := wire.Hello{Duration: p.Duration, ChunkSize: uint32(p.ChunkSize), Interval: p.Interval}
	h.Kind = wire.KindInteractiveUpload
	up, upR, err := openStream(ctx, upConn, h)
	if err != nil {
		return res, err
	}
	defer up.Close()
	h.Kind = wire.KindInteractiveDownload
	down, downR, err := openStream(ctx, downConn, h)
	if err != nil {
		return res, err
	}
	defer down.Close()

	var wg sync.WaitGroup
	var upErr, downErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		res.Upload, upErr = interactiveUpload(ctx, up, upR, p, c.Stop)
	}()
	go func() {
		defer wg.Done()
		res.Download, downErr = interactiveDownload(down, downR, p, c.Stop)
	}()
	wg.Wait()
	if upErr != nil {
		return res, fmt.Errorf("upload: %w", upErr)
	}
	if downErr != nil {
		return res, fmt.Errorf("download: %w", downErr)
	}
	return res, nil
}

func interactiveUpload(ctx context.Context, s transport.Stream, r *wire.Reader, p Params, stop <-chan struct{}) (*InteractiveDirection, error) {
	cs := newChunkSender()
	readErr := cs.readAcks(r, func(f wire.Frame) error {
		if f.Type == wire.TypeError {
			return serverError(f.Body)
		}
		return fmt.Errorf("%w: unexpected %s frame", ErrProtocol, f.Type)
	}, func(err error) error { return err }, nil)
	_ = s.SetDeadline(time.Now().Add(p.Duration + p.AckGrace + 10*time.Second))
	sendErr := make(chan error, 1)
	go func() { sendErr <- cs.run(ctx, s, p.ChunkSize, p.Interval, p.Duration, stop) }()
	select {
	case err := <-sendErr:
		if err != nil {
			return summarize(cs.wait(ctx, 0)), err
		}
	case err := <-readErr:
		return summarize(cs.wait(ctx, 0)), noEOF(err)
	}
	ds := cs.wait(ctx, p.AckGrace)
	if err := wire.WriteFrame(s, wire.TypeDone, nil); err != nil {
		return summarize(ds), err
	}
	_ = s.CloseWrite()
	return summarize(ds), nil
}

// interactiveDownload acks the server's chunks; when stop closes it asks
// the server to stop sending (a Done frame) and reads on to the report.
func interactiveDownload(s transport.Stream, r *wire.Reader, p Params, stop <-chan struct{}) (*InteractiveDirection, error) {
	_ = s.SetDeadline(time.Now().Add(p.Duration + p.AckGrace + 10*time.Second))
	var wmu sync.Mutex // acks and the Done frame share the stream
	write := func(t wire.Type, body []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		return wire.WriteFrame(s, t, body)
	}
	if stop != nil {
		ended := make(chan struct{})
		defer close(ended)
		go func() {
			select {
			case <-stop:
				_ = write(wire.TypeDone, nil)
			case <-ended:
			}
		}()
	}
	for {
		f, err := r.ReadFrame()
		if err != nil {
			return nil, noEOF(err)
		}
		switch f.Type {
		case wire.TypeChunk:
			seq, err := wire.DecodeChunk(f.Body)
			if err != nil {
				return nil, err
			}
			if err := write(wire.TypeAck, wire.EncodeAck(seq)); err != nil {
				return nil, err
			}
		case wire.TypeReport:
			ds, err := wire.DecodeReport(f.Body)
			if err != nil {
				return nil, err
			}
			_ = s.CloseWrite()
			return summarize(ds), nil
		case wire.TypeError:
			return nil, serverError(f.Body)
		default:
			return nil, fmt.Errorf("%w: unexpected %s frame", ErrProtocol, f.Type)
		}
	}
}

func (interactivePattern) Register(m *Mux) {
	// Upload: ack every chunk as it arrives.
	m.HandleStream(wire.KindInteractiveUpload, ALPNInteractive, func(ctx context.Context, s transport.Stream, h wire.Hello, r *wire.Reader) error {
		limit := time.Now().Add(h.Duration + m.Limits.ReadTimeout)
		for {
			if time.Now().After(limit) {
				return &wire.ErrorFrame{Code: wire.CodeLimit, Reason: "interactive upload ran past its announced duration"}
			}
			_ = s.SetDeadline(time.Now().Add(h.Interval + m.Limits.ReadTimeout))
			f, err := r.ReadFrame()
			if err != nil {
				return err
			}
			switch f.Type {
			case wire.TypeChunk:
				if len(f.Body) != int(h.ChunkSize) {
					return &wire.ErrorFrame{Code: wire.CodeMalformed, Reason: fmt.Sprintf("chunk of %d bytes, announced %d", len(f.Body), h.ChunkSize)}
				}
				seq, _ := wire.DecodeChunk(f.Body)
				if err := wire.WriteFrame(s, wire.TypeAck, wire.EncodeAck(seq)); err != nil {
					return err
				}
			case wire.TypeDone:
				return s.CloseWrite()
			default:
				return &wire.ErrorFrame{Code: wire.CodeMalformed, Reason: fmt.Sprintf("unexpected %s frame in interactive upload", f.Type)}
			}
		}
	})
	// Download: send chunks, time the client's acks, report the delays.
	m.HandleStream(wire.KindInteractiveDownload, ALPNInteractive, func(ctx context.Context, s transport.Stream, h wire.Hello, r *wire.Reader) error {
		cs := newChunkSender()
		stop := make(chan struct{})
		readErr := cs.readAcks(r, func(f wire.Frame) error {
			return &wire.ErrorFrame{Code: wire.CodeMalformed, Reason: fmt.Sprintf("unexpected %s frame in interactive download", f.Type)}
		}, func(err error) error {
			return &wire.ErrorFrame{Code: wire.CodeMalformed, Reason: err.Error()}
		}, sync.OnceFunc(func() { close(stop) }))
		_ = s.SetDeadline(time.Now().Add(h.Duration + 2*m.Limits.ReadTimeout))
		if err := cs.run(ctx, s, int(h.ChunkSize), h.Interval, h.Duration, stop); err != nil {
			return err
		}
		grace := min(DefaultAckGrace, m.Limits.ReadTimeout)
		ds := cs.wait(ctx, grace)
		select {
		case err := <-readErr:
			if _, ok := err.(*wire.ErrorFrame); ok {
				return err
			}
		default:
		}
		if err := wire.WriteFrame(s, wire.TypeReport, wire.EncodeReport(ds)); err != nil {
			return err
		}
		return s.CloseWrite()
	})
}
