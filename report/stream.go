package report

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Producer is the binary that writes results: the command line sets it
// from the linker-stamped build information.
var Producer = Tool{Name: "mptester", Version: "dev", Commit: "none"}

// NewHeader fills the envelope header for a run starting now; paths are
// Paths, Pathers, or probe.Paths (whose JSON is Path's: report imports
// no socket code, and probe no result model).
func NewHeader[P any](command, probeID string, paths []P, config any) (Header, error) {
	cfg, err := json.Marshal(config)
	if err != nil {
		return Header{}, fmt.Errorf("encode run config: %w", err)
	}
	recs, err := pathRecords(paths)
	if err != nil {
		return Header{}, err
	}
	return Header{
		SchemaVersion: SchemaVersion,
		RunID:         uuid.NewString(),
		ProbeID:       probeID,
		Command:       command,
		Tool:          Producer,
		Host:          CurrentHost(),
		StartedAt:     time.Now().UTC(),
		Clock:         CurrentClock(),
		Paths:         recs,
		Config:        cfg,
	}, nil
}

// CurrentHost describes this machine; the hostname is hashed so uploaded
// results do not name the machine.
func CurrentHost() Host {
	name, _ := os.Hostname()
	sum := sha256.Sum256([]byte(name))
	return Host{OS: runtime.GOOS, Arch: runtime.GOARCH, Kernel: kernelVersion(), HostnameHash: hex.EncodeToString(sum[:8])}
}

// Stream writes a run as JSON Lines: a header line, one line per record, and
// a trailer with the status. Every line is flushed as written so an
// interrupted run loses nothing it measured. Safe for concurrent use.
type Stream struct {
	mu sync.Mutex
	w  *bufio.Writer
	// line is each record's encoding, reused: json.Marshal would allocate
	// it (and the newline often again) for every record.
	line   bytes.Buffer
	enc    *json.Encoder // into line
	header Header
	closed bool
	n      int
	now    func() time.Time // the trailer's clock; tests fix it
}

type headerLine struct {
	Type string `json:"type"`
	Header
}

type trailerLine struct {
	Type       string    `json:"type"`
	RunID      string    `json:"run_id"`
	FinishedAt time.Time `json:"finished_at"`
	Status     Status    `json:"status"`
	Reason     string    `json:"reason,omitempty"`
	Records    int       `json:"records"`
}

// NewStream writes the header and returns the stream.
func NewStream(w io.Writer, h Header) (*Stream, error) {
	s := &Stream{w: bufio.NewWriterSize(w, 64<<10), header: h, now: time.Now}
	s.enc = json.NewEncoder(&s.line) // escapes HTML like json.Marshal; ends the line
	if err := s.writeLine(headerLine{Type: TypeHeader, Header: h}); err != nil {
		return nil, err
	}
	return s, nil
}

// Header returns the header the stream was opened with.
func (s *Stream) Header() Header { return s.header }

// Write appends one record; rec must marshal to an object with a "type".
func (s *Stream) Write(rec any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("report stream already closed")
	}
	s.n++
	return s.writeLineLocked(rec)
}

// Close writes the trailer. It is safe to call more than once; only the
// first call writes.
func (s *Stream) Close(status Status, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.writeLineLocked(trailerLine{Type: TypeTrailer, RunID: s.header.RunID, FinishedAt: s.now().UTC(), Status: status, Reason: reason, Records: s.n})
}

func (s *Stream) writeLine(v any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writeLineLocked(v)
}

func (s *Stream) writeLineLocked(v any) error {
	s.line.Reset()
	if err := s.enc.Encode(v); err != nil {
		return fmt.Errorf("encode record: %w", err)
	}
	_, err := s.w.Write(s.line.Bytes())
	if s.line.Cap() > 1<<20 {
		s.line = bytes.Buffer{} // one huge record does not pin its buffer
	}
	if err != nil {
		return err
	}
	return s.w.Flush()
}
