package spill

import (
	"bytes"
	"fmt"
	"io"
	"os"
)

// Bytes is byte strings stored back to back (a list's names): in memory,
// or past SpillAt bytes in a temporary file with the newest bytes in a
// write buffer. Add until Done; Get is safe from many goroutines after.
type Bytes struct {
	// SpillAt is how many bytes stay in memory before they all go to the
	// file. Set before the first Add.
	SpillAt int

	mem  []byte // bytes [base, size)
	base int64  // bytes before base are in f
	size int64
	f    *os.File
	err  error // the file failed: everything stays in memory from then on
}

// Len is how many bytes were added.
func (s *Bytes) Len() int64 { return s.size }

// Spilled says the bytes went to the file.
func (s *Bytes) Spilled() bool { return s.f != nil }

// Add appends b.
func (s *Bytes) Add(b []byte) {
	limit := s.SpillAt
	if TestBytesAt > 0 {
		limit = TestBytesAt
	}
	switch {
	case s.err != nil:
	case s.f == nil && s.size+int64(len(b)) > int64(limit):
		s.flush() // the list is long: its names go to the file
	case s.f != nil && len(s.mem)+len(b) > 64<<10:
		s.flush()
	}
	s.mem = append(s.mem, b...)
	s.size += int64(len(b))
}

// flush moves the buffered bytes to the file (created on first use).
func (s *Bytes) flush() {
	if s.f == nil {
		f, err := UnlinkedTemp("mptester-survey-names-*")
		if err != nil {
			s.err = err
			return
		}
		s.f = f
	}
	if _, err := s.f.WriteAt(s.mem, s.base); err != nil {
		s.err = err
		return
	}
	s.base += int64(len(s.mem))
	s.mem = s.mem[:0]
	if cap(s.mem) > 64<<10 {
		s.mem = make([]byte, 0, 64<<10) // the write buffer from now on
	}
}

// Done ends building: a spilled store keeps at most its last buffer.
func (s *Bytes) Done() {
	if s.f != nil && s.err == nil {
		s.flush()
		if s.err == nil {
			s.mem = nil
		}
	}
	if s.f == nil && cap(s.mem) > len(s.mem)+len(s.mem)/8 {
		s.mem = bytes.Clone(s.mem)
	}
}

// Get returns bytes [start, end) (in buf when read from the file).
func (s *Bytes) Get(start, end uint32, buf []byte) []byte {
	if int64(start) >= s.base {
		return append(buf[:0], s.mem[int64(start)-s.base:int64(end)-s.base]...)
	}
	n := int(end - start)
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := s.f.ReadAt(buf, int64(start)); err != nil && err != io.EOF {
		// The file was written by this process and is still open: a
		// failing read means the disk failed under us.
		panic(fmt.Sprintf("survey: read spilled domain names: %v", err))
	}
	return buf
}

// Close removes the file.
func (s *Bytes) Close() error {
	if s.f == nil {
		return nil
	}
	err := CloseTemp(s.f)
	s.f = nil
	return err
}
