package collect

import (
	"bufio"
	"bytes"
	"context"
	"io"

	"github.com/mptester/mptester/collect/rawstore"
	"github.com/mptester/mptester/collect/store"
)

// openRaw opens a stored run's raw upload, from the raw store or the
// database.
func (s *Server) openRaw(ctx context.Context, run store.Run) (io.ReadCloser, error) {
	if run.RawPath == store.RawInline {
		b, err := s.cfg.Store.GetRaw(ctx, run.RunID)
		if err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(b)), nil
	}
	return s.raw.Open(ctx, run.RawPath)
}

// DefaultInlineMax is the largest upload kept in the database
// (store.RawInline) instead of the raw store: a pattern run's envelope is
// a few kB, and a file each cost a create, a link and two fsyncs (1.5 ms
// of CPU per envelope, most of it contending for directory locks), an
// object a PUT, where rows share one group commit. 128 kB × MaxInFlight
// bounds the memory it takes.
const DefaultInlineMax = 128 << 10

// spool holds one upload while it streams in: in memory up to the
// inline limit, past that in an object of the raw store.
type spool struct {
	ctx   context.Context
	raw   rawstore.Backend
	max   int
	runID string
	mem   []byte
	obj   rawstore.Object
	n     int64 // written to obj
	w     *bufio.Writer
}

func (s *Server) spool(ctx context.Context, runID string) *spool {
	return &spool{ctx: ctx, raw: s.raw, max: s.inlineMax, runID: runID}
}

func (s *spool) Write(p []byte) (int, error) {
	if s.obj == nil && len(s.mem)+len(p) <= s.max {
		s.mem = append(s.mem, p...)
		return len(p), nil
	}
	if s.obj == nil {
		obj, err := s.raw.Create(s.ctx, s.runID)
		if err != nil {
			return 0, err
		}
		s.obj = obj
		if _, err := s.obj.Write(s.mem); err != nil {
			return 0, err
		}
		s.n, s.mem = int64(len(s.mem)), nil
	}
	if s.w == nil && s.n+int64(len(p)) > spoolBuffer {
		// A large upload: its writes go out in big pieces. A small one
		// is spared the buffer (an allocation each).
		s.w = bufio.NewWriterSize(s.obj, spoolBuffer)
	}
	s.n += int64(len(p))
	if s.w == nil {
		return s.obj.Write(p)
	}
	return s.w.Write(p)
}

// spoolBuffer is the write buffer of an upload past this size.
const spoolBuffer = 256 << 10

// flush makes everything written readable through ReadAt.
func (s *spool) flush() error {
	if s.w == nil {
		return nil
	}
	return s.w.Flush()
}

func (s *spool) ReadAt(p []byte, off int64) (int, error) {
	if s.obj != nil {
		return s.obj.ReadAt(p, off)
	}
	return bytes.NewReader(s.mem).ReadAt(p, off)
}

// commit makes the upload durable in the raw store and returns its key,
// or, when it stayed in memory, returns store.RawInline and the body for
// the index row's transaction to make durable.
func (s *spool) commit(sha string) (key string, body []byte, err error) {
	if s.obj == nil {
		return store.RawInline, s.mem, nil
	}
	key, err = s.obj.Commit(s.ctx, sha)
	s.obj = nil
	return key, nil, err
}

// discard removes what an upload that was not committed left behind.
func (s *spool) discard() {
	if s.obj != nil {
		s.obj.Abort()
	}
}
