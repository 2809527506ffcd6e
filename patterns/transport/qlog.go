package transport

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"
)

// qlog traces of the QUIC transports (--qlog DIR on run and serve): one
// JSON-SEQ file per connection, DIR/<original destination connection
// ID>_<client|server>.sqlog as quic-go names them, written by quic-go's
// own qlog writer for quic and quic-handover and by package mpquic's for
// mpquic (the same event names, with path IDs).

// qlogFile creates a connection's trace file; nil (and a logged error is
// the caller's) when it cannot.
func qlogFile(dir string, isClient bool, odcid []byte) (io.WriteCloser, error) {
	side := "server"
	if isClient {
		side = "client"
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s_%s.sqlog", hex.EncodeToString(odcid), side)))
	if err != nil {
		return nil, err
	}
	openQlogs.opened()
	return &bufferedFile{Writer: bufio.NewWriterSize(f, 64<<10), f: f}, nil
}

type bufferedFile struct {
	*bufio.Writer
	f      *os.File
	closed sync.Once
}

func (b *bufferedFile) Close() error {
	err := b.Flush()
	if cerr := b.f.Close(); err == nil {
		err = cerr
	}
	b.closed.Do(openQlogs.closed)
	return err
}

// openQlogs counts the trace files not closed yet. A trace is closed by
// its writer after its connection ended (quic-go's in a goroutine of its
// own, mpquic's when the connection's loop exits), so a process that
// returns right after its last connection closed would leave traces cut
// short: it waits for them first (WaitQlogs).
var openQlogs qlogCount

type qlogCount struct {
	mu   sync.Mutex
	open int
	idle chan struct{} // closed when open falls to 0
}

func (c *qlogCount) opened() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open == 0 {
		c.idle = make(chan struct{})
	}
	c.open++
}

func (c *qlogCount) closed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open--; c.open == 0 {
		close(c.idle)
	}
}

// WaitQlogs waits until every qlog trace file opened so far is complete
// and closed, or ctx ends (a connection that never ends keeps its trace
// open).
func WaitQlogs(ctx context.Context) error {
	openQlogs.mu.Lock()
	if openQlogs.open == 0 {
		openQlogs.mu.Unlock()
		return nil
	}
	idle := openQlogs.idle
	openQlogs.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("qlog traces still open: %w", context.Cause(ctx))
	}
}

// quicTracer is quic-go's Tracer writing traces into dir, teed with
// also (a path monitor) when set; nil when neither is wanted.
func quicTracer(dir string, also qlogwriter.Trace) func(context.Context, bool, quic.ConnectionID) qlogwriter.Trace {
	if dir == "" && also == nil {
		return nil
	}
	return func(_ context.Context, isClient bool, id quic.ConnectionID) qlogwriter.Trace {
		var traces []qlogwriter.Trace
		if also != nil {
			traces = append(traces, also)
		}
		if dir != "" {
			if w, err := qlogFile(dir, isClient, id.Bytes()); err == nil {
				seq := qlogwriter.NewConnectionFileSeq(w, isClient, id)
				go seq.Run()
				traces = append(traces, seq)
			}
		}
		if len(traces) == 1 {
			return traces[0]
		}
		return teeTrace(traces)
	}
}

// mpquicQlog is mpquic's Config.Qlog writing into dir; nil without one.
func mpquicQlog(dir string) func(bool, []byte) io.WriteCloser {
	if dir == "" {
		return nil
	}
	return func(isClient bool, odcid []byte) io.WriteCloser {
		w, err := qlogFile(dir, isClient, odcid)
		if err != nil {
			return nil
		}
		return w
	}
}

// teeTrace records every event in each of its traces.
type teeTrace []qlogwriter.Trace

func (t teeTrace) AddProducer() qlogwriter.Recorder {
	rs := make(teeRecorder, len(t))
	for i, tr := range t {
		rs[i] = tr.AddProducer()
	}
	return rs
}

type teeRecorder []qlogwriter.Recorder

func (r teeRecorder) RecordEvent(e qlogwriter.Event) {
	for _, x := range r {
		x.RecordEvent(e)
	}
}

func (r teeRecorder) Close() error {
	var first error
	for _, x := range r {
		if err := x.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// queueDrops counts the datagrams quic-go received from the socket and
// then dropped before processing because the connection's queue of
// unprocessed (or undecryptable) packets was full: they crossed the wire
// and left the socket but are not in ConnectionStats.BytesReceived. quic-go
// reports them only as qlog PacketDropped events with the DoS-prevention
// trigger, so this trace is installed on every connection that samples it.
type queueDrops struct{ packets, bytes atomic.Uint64 }

func (d *queueDrops) AddProducer() qlogwriter.Recorder { return d }

func (d *queueDrops) RecordEvent(e qlogwriter.Event) {
	if p, ok := e.(qlog.PacketDropped); ok && p.Trigger == qlog.PacketDropDOSPrevention {
		d.packets.Add(1)
		d.bytes.Add(uint64(p.Raw.Length))
	}
}

func (d *queueDrops) Close() error { return nil }
