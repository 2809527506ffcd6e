// Package wire is the binary framing of mptester's stream patterns (iperf,
// interactive) between `mptester run` and `mptester serve`. HTTP patterns
// (ping, bulk) use plain HTTP and need no framing.
//
// Every frame is: type (1 byte) | length (uint32, big endian) | body.
// Integers are big endian. A frame longer than MaxFrame, an unknown type or
// a body of the wrong size is malformed; the server closes that session.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// Version of the framing, carried in Hello.
const Version = 1

// MaxFrame bounds a frame body: an interactive chunk is 2000 bytes by
// default and a delay report of 10 minutes at 10 chunks/s is 48 KB.
const MaxFrame = 1 << 20

// Type of a frame.
type Type byte

const (
	TypeHello  Type = 1 // client -> server, first frame of a stream
	TypeChunk  Type = 2 // interactive data chunk
	TypeAck    Type = 3 // interactive ack of one chunk
	TypeReport Type = 4 // delays measured by the server (download direction)
	TypeResult Type = 5 // iperf: bytes the server received (upload) or sent (download), per interval
	TypeError  Type = 6 // server refuses or aborts, with a reason
	TypeData   Type = 7 // iperf payload
	TypeDone   Type = 8 // end of the sender's data
	TypeStats  Type = 9 // iperf download: the server's sender statistics, after its result
)

func (t Type) String() string {
	switch t {
	case TypeHello:
		return "hello"
	case TypeChunk:
		return "chunk"
	case TypeAck:
		return "ack"
	case TypeReport:
		return "report"
	case TypeResult:
		return "result"
	case TypeError:
		return "error"
	case TypeData:
		return "data"
	case TypeDone:
		return "done"
	case TypeStats:
		return "stats"
	}
	return fmt.Sprintf("type(%d)", byte(t))
}

// ErrMalformed wraps every decoding failure.
var ErrMalformed = errors.New("malformed frame")

func malformed(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, a...))
}

// Frame is one decoded frame; Body aliases the reader's buffer until the
// next ReadFrame.
type Frame struct {
	Type Type
	Body []byte
}

// HeaderLen is the size of a frame header.
const HeaderLen = 5

// AppendFrame appends a frame header and body to b.
func AppendFrame(b []byte, t Type, body []byte) []byte {
	b = append(b, byte(t))
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	return append(b, body...)
}

// WriteFrame writes one frame in a single Write call (so a frame is never
// interleaved with another writer's output when the caller serialises).
func WriteFrame(w io.Writer, t Type, body []byte) error {
	_, err := w.Write(AppendFrame(make([]byte, 0, HeaderLen+len(body)), t, body))
	return err
}

// Reader reads frames, reusing one buffer.
type Reader struct {
	r   io.Reader
	hdr [HeaderLen]byte
	buf []byte
	max int
	// FrameStart is when the header of the last frame was read: the
	// arrival of its first bytes (a large frame completes much later).
	FrameStart time.Time
}

// NewReader reads frames of at most max bytes (0: MaxFrame).
func NewReader(r io.Reader, max int) *Reader {
	if max <= 0 || max > MaxFrame {
		max = MaxFrame
	}
	return &Reader{r: r, max: max}
}

// ReadFrame reads the next frame. io.EOF means a clean end between frames;
// a stream cut inside a frame is io.ErrUnexpectedEOF.
func (r *Reader) ReadFrame() (Frame, error) {
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		return Frame{}, err
	}
	r.FrameStart = time.Now()
	t := Type(r.hdr[0])
	if t < TypeHello || t > TypeStats {
		return Frame{}, malformed("unknown frame type %d", r.hdr[0])
	}
	n := binary.BigEndian.Uint32(r.hdr[1:])
	if n > uint32(r.max) {
		return Frame{}, malformed("%s frame of %d bytes exceeds limit %d", t, n, r.max)
	}
	if cap(r.buf) < int(n) {
		r.buf = make([]byte, n)
	}
	r.buf = r.buf[:n]
	if _, err := io.ReadFull(r.r, r.buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, err
	}
	return Frame{Type: t, Body: r.buf}, nil
}

// Kind says what a stream carries, from the client's point of view.
type Kind byte

const (
	KindIperfUpload         Kind = 1 // client sends, server counts
	KindIperfDownload       Kind = 2 // server sends, client counts
	KindInteractiveUpload   Kind = 3 // client sends chunks, server acks
	KindInteractiveDownload Kind = 4 // server sends chunks, client acks; server reports its delays
)

func (k Kind) String() string {
	switch k {
	case KindIperfUpload:
		return "iperf-upload"
	case KindIperfDownload:
		return "iperf-download"
	case KindInteractiveUpload:
		return "interactive-upload"
	case KindInteractiveDownload:
		return "interactive-download"
	}
	return fmt.Sprintf("kind(%d)", byte(k))
}

// Hello opens a stream: what it carries and for how long.
type Hello struct {
	Version   byte
	Kind      Kind
	Duration  time.Duration // ms resolution on the wire
	ChunkSize uint32        // interactive chunk size
	Interval  time.Duration // interactive sending interval, ms resolution
}

const helloLen = 1 + 1 + 4 + 4 + 4

// MaxChunk bounds an interactive chunk so a chunk frame fits MaxFrame.
const MaxChunk = 64 << 10

// Encode returns the body of a Hello frame.
func (h Hello) Encode() []byte {
	b := make([]byte, 0, helloLen)
	b = append(b, h.Version, byte(h.Kind))
	b = binary.BigEndian.AppendUint32(b, uint32(h.Duration.Milliseconds()))
	b = binary.BigEndian.AppendUint32(b, h.ChunkSize)
	b = binary.BigEndian.AppendUint32(b, uint32(h.Interval.Milliseconds()))
	return b
}

// DecodeHello parses and validates a Hello body.
func DecodeHello(b []byte) (Hello, error) {
	if len(b) != helloLen {
		return Hello{}, malformed("hello of %d bytes, want %d", len(b), helloLen)
	}
	h := Hello{Version: b[0], Kind: Kind(b[1]),
		Duration:  time.Duration(binary.BigEndian.Uint32(b[2:])) * time.Millisecond,
		ChunkSize: binary.BigEndian.Uint32(b[6:]),
		Interval:  time.Duration(binary.BigEndian.Uint32(b[10:])) * time.Millisecond}
	if h.Version != Version {
		return Hello{}, malformed("unsupported version %d", h.Version)
	}
	if h.Kind < KindIperfUpload || h.Kind > KindInteractiveDownload {
		return Hello{}, malformed("unknown stream kind %d", b[1])
	}
	if h.Duration <= 0 {
		return Hello{}, malformed("zero duration")
	}
	if h.Kind == KindInteractiveUpload || h.Kind == KindInteractiveDownload {
		if h.ChunkSize < ChunkHeaderLen || h.ChunkSize > MaxChunk {
			return Hello{}, malformed("chunk size %d outside [%d, %d]", h.ChunkSize, ChunkHeaderLen, MaxChunk)
		}
		if h.Interval <= 0 {
			return Hello{}, malformed("zero interval")
		}
	}
	return h, nil
}

// ChunkHeaderLen: sequence number at the start of a chunk body; the rest is
// padding up to the chunk size.
const ChunkHeaderLen = 4

// AppendChunk appends a chunk frame of size bytes (>= ChunkHeaderLen).
func AppendChunk(b []byte, seq uint32, size int) []byte {
	b = append(b, byte(TypeChunk))
	b = binary.BigEndian.AppendUint32(b, uint32(size))
	b = binary.BigEndian.AppendUint32(b, seq)
	return append(b, make([]byte, size-ChunkHeaderLen)...)
}

// DecodeChunk returns the sequence number of a chunk body.
func DecodeChunk(b []byte) (uint32, error) {
	if len(b) < ChunkHeaderLen {
		return 0, malformed("chunk of %d bytes", len(b))
	}
	return binary.BigEndian.Uint32(b), nil
}

// EncodeAck is the body of an ack of chunk seq.
func EncodeAck(seq uint32) []byte { return binary.BigEndian.AppendUint32(nil, seq) }

// DecodeAck parses an ack body.
func DecodeAck(b []byte) (uint32, error) {
	if len(b) != 4 {
		return 0, malformed("ack of %d bytes", len(b))
	}
	return binary.BigEndian.Uint32(b), nil
}

// Delay is one chunk->ack delay; Lost marks a chunk never acked.
type Delay struct {
	Seq   uint32
	Delay time.Duration // µs resolution on the wire
	Lost  bool
}

const delayLen = 4 + 4

// lostMarker on the wire: a chunk that was never acknowledged.
const lostMarker = ^uint32(0)

// EncodeReport is the body of a delay report.
func EncodeReport(ds []Delay) []byte {
	b := make([]byte, 0, 4+delayLen*len(ds))
	b = binary.BigEndian.AppendUint32(b, uint32(len(ds)))
	for _, d := range ds {
		b = binary.BigEndian.AppendUint32(b, d.Seq)
		us := uint32(min(d.Delay.Microseconds(), int64(lostMarker-1)))
		if d.Lost {
			us = lostMarker
		}
		b = binary.BigEndian.AppendUint32(b, us)
	}
	return b
}

// DecodeReport parses a delay report body.
func DecodeReport(b []byte) ([]Delay, error) {
	if len(b) < 4 {
		return nil, malformed("report of %d bytes", len(b))
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(len(b)-4) != uint64(n)*delayLen {
		return nil, malformed("report says %d delays in %d bytes", n, len(b)-4)
	}
	ds := make([]Delay, n)
	for i := range ds {
		p := b[4+i*delayLen:]
		ds[i].Seq = binary.BigEndian.Uint32(p)
		us := binary.BigEndian.Uint32(p[4:])
		if us == lostMarker {
			ds[i].Lost = true
		} else {
			ds[i].Delay = time.Duration(us) * time.Microsecond
		}
	}
	return ds, nil
}

// Interval is what one side counted during one period of an iperf test.
type Interval struct {
	Start, End time.Duration // since the first byte, µs resolution
	Bytes      uint64
}

const intervalLen = 4 + 4 + 8

// Result is the server's view of an iperf stream: bytes received (upload)
// or sent (download).
type Result struct {
	Bytes     uint64
	Intervals []Interval
}

// EncodeResult is the body of a result frame.
func EncodeResult(r Result) []byte {
	b := make([]byte, 0, 12+intervalLen*len(r.Intervals))
	b = binary.BigEndian.AppendUint64(b, r.Bytes)
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Intervals)))
	for _, iv := range r.Intervals {
		b = binary.BigEndian.AppendUint32(b, uint32(iv.Start.Microseconds()))
		b = binary.BigEndian.AppendUint32(b, uint32(iv.End.Microseconds()))
		b = binary.BigEndian.AppendUint64(b, iv.Bytes)
	}
	return b
}

// DecodeResult parses a result body.
func DecodeResult(b []byte) (Result, error) {
	if len(b) < 12 {
		return Result{}, malformed("result of %d bytes", len(b))
	}
	r := Result{Bytes: binary.BigEndian.Uint64(b)}
	n := binary.BigEndian.Uint32(b[8:])
	if uint64(len(b)-12) != uint64(n)*intervalLen {
		return Result{}, malformed("result says %d intervals in %d bytes", n, len(b)-12)
	}
	r.Intervals = make([]Interval, n)
	for i := range r.Intervals {
		p := b[12+i*intervalLen:]
		r.Intervals[i] = Interval{
			Start: time.Duration(binary.BigEndian.Uint32(p)) * time.Microsecond,
			End:   time.Duration(binary.BigEndian.Uint32(p[4:])) * time.Microsecond,
			Bytes: binary.BigEndian.Uint64(p[8:]),
		}
		if r.Intervals[i].End < r.Intervals[i].Start {
			return Result{}, malformed("interval %d ends before it starts", i)
		}
	}
	return r, nil
}

// Stats is what the sender's transport counted while it sent an iperf
// stream: the server's own counts when it is the sender (download).
// Retransmissions are TCP total_retrans, MPTCP's summed over subflows or
// QUIC packets declared lost; Intervals[i] belongs to the Result's
// interval i. The server sends it after the Result, so a client that
// predates it has stopped reading and still decodes the Result it knows.
type Stats struct {
	Retransmissions uint64
	Intervals       []uint64
}

const statsHeaderLen = 8 + 4

// EncodeStats is the body of a stats frame.
func EncodeStats(s Stats) []byte {
	b := make([]byte, 0, statsHeaderLen+8*len(s.Intervals))
	b = binary.BigEndian.AppendUint64(b, s.Retransmissions)
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.Intervals)))
	for _, n := range s.Intervals {
		b = binary.BigEndian.AppendUint64(b, n)
	}
	return b
}

// DecodeStats parses a stats body.
func DecodeStats(b []byte) (Stats, error) {
	if len(b) < statsHeaderLen {
		return Stats{}, malformed("stats of %d bytes", len(b))
	}
	s := Stats{Retransmissions: binary.BigEndian.Uint64(b)}
	n := binary.BigEndian.Uint32(b[8:])
	if uint64(len(b)-statsHeaderLen) != uint64(n)*8 {
		return Stats{}, malformed("stats says %d intervals in %d bytes", n, len(b)-statsHeaderLen)
	}
	s.Intervals = make([]uint64, n)
	for i := range s.Intervals {
		s.Intervals[i] = binary.BigEndian.Uint64(b[statsHeaderLen+8*i:])
	}
	return s, nil
}

// Error codes sent by the server.
type Code uint16

const (
	CodeMalformed Code = 1 // the peer sent something that does not parse
	CodeLimit     Code = 2 // a server limit refuses the request
	CodeBusy      Code = 3 // too many sessions
	CodeInternal  Code = 4
	CodeShutdown  Code = 5 // the server is stopping
)

func (c Code) String() string {
	switch c {
	case CodeMalformed:
		return "malformed"
	case CodeLimit:
		return "limit"
	case CodeBusy:
		return "busy"
	case CodeInternal:
		return "internal"
	case CodeShutdown:
		return "shutdown"
	}
	return fmt.Sprintf("code(%d)", uint16(c))
}

// MaxReason bounds the text of an error frame.
const MaxReason = 512

// ErrorFrame is the body of an error frame; it is also a Go error so a
// client can return the server's refusal as is.
type ErrorFrame struct {
	Code   Code
	Reason string
}

func (e *ErrorFrame) Error() string { return fmt.Sprintf("server refused (%s): %s", e.Code, e.Reason) }

// Encode returns the body of an error frame.
func (e *ErrorFrame) Encode() []byte {
	r := e.Reason
	if len(r) > MaxReason {
		r = r[:MaxReason]
	}
	b := binary.BigEndian.AppendUint16(nil, uint16(e.Code))
	return append(b, r...)
}

// DecodeError parses an error frame body.
func DecodeError(b []byte) (*ErrorFrame, error) {
	if len(b) < 2 || len(b) > 2+MaxReason {
		return nil, malformed("error frame of %d bytes", len(b))
	}
	return &ErrorFrame{Code: Code(binary.BigEndian.Uint16(b)), Reason: string(b[2:])}, nil
}
