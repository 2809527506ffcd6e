package h3

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// HTTP/3 framing (RFC 9114 §7) and its error codes (§8.1).

const (
	frameData     = 0x00
	frameHeaders  = 0x01
	frameSettings = 0x04
	frameGoaway   = 0x07

	streamControl = 0x00
	streamPush    = 0x01
	streamEncoder = 0x02 // QPACK (RFC 9204 §4.2)
	streamDecoder = 0x03

	settingMaxFieldSectionSize = 0x06
)

// Error codes (RFC 9114 §8.1, RFC 9204 §6).
const (
	ErrCodeNoError              = 0x100
	ErrCodeGeneralProtocolError = 0x101
	ErrCodeInternalError        = 0x102
	ErrCodeStreamCreationError  = 0x103
	ErrCodeClosedCriticalStream = 0x104
	ErrCodeFrameUnexpected      = 0x105
	ErrCodeFrameError           = 0x106
	ErrCodeExcessiveLoad        = 0x107
	ErrCodeSettingsError        = 0x109
	ErrCodeMissingSettings      = 0x10a
	ErrCodeRequestRejected      = 0x10b
	ErrCodeRequestCancelled     = 0x10c
	ErrCodeRequestIncomplete    = 0x10d
	ErrCodeMessageError         = 0x10e
	ErrCodeDecompressionFailed  = 0x200
)

var (
	errMessage        = errors.New("h3: malformed message")
	errHeaderTooLarge = errors.New("h3: field section too large")
)

// Error is an HTTP/3 error with its code.
type Error struct {
	Code   uint64
	Reason string
}

func (e *Error) Error() string { return fmt.Sprintf("h3: error 0x%x: %s", e.Code, e.Reason) }

// appendVarint appends a QUIC variable-length integer (RFC 9000 §16).
func appendVarint(b []byte, v uint64) []byte {
	switch {
	case v < 1<<6:
		return append(b, byte(v))
	case v < 1<<14:
		return append(b, 0x40|byte(v>>8), byte(v))
	case v < 1<<30:
		return append(b, 0x80|byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	default:
		return append(b, 0xc0|byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
}

// readVarint reads one from r.
func readVarint(r io.ByteReader) (uint64, error) {
	c, err := r.ReadByte()
	if err != nil {
		return 0, err
	}
	n := 1 << (c >> 6)
	v := uint64(c & 0x3f)
	for i := 1; i < n; i++ {
		c, err := r.ReadByte()
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		v = v<<8 | uint64(c)
	}
	return v, nil
}

func appendFrameHeader(b []byte, typ, length uint64) []byte {
	return appendVarint(appendVarint(b, typ), length)
}

// frameReader reads the frames of a request stream or the control stream.
type frameReader struct {
	r *bufio.Reader
	// left is what remains of the DATA frame being read.
	left uint64
}

// next returns the next frame's type and length, skipping frame types we
// do not know (§9: reserved and unknown types are ignored). io.EOF: the
// stream ended between frames.
func (fr *frameReader) next() (typ, length uint64, err error) {
	for {
		typ, err = readVarint(fr.r)
		if err != nil {
			return 0, 0, err
		}
		if length, err = readVarint(fr.r); err != nil {
			return 0, 0, unexpected(err)
		}
		switch typ {
		case frameData, frameHeaders, frameSettings, frameGoaway, 0x03, 0x05, 0x0d:
			return typ, length, nil
		case 0x02, 0x06, 0x08, 0x09: // HTTP/2's, reserved (§7.2.8)
			return 0, 0, &Error{ErrCodeFrameUnexpected, fmt.Sprintf("HTTP/2 frame type 0x%x", typ)}
		}
		if _, err := fr.r.Discard(int(min(length, 1<<30))); err != nil {
			return 0, 0, unexpected(err)
		}
	}
}

// payload reads a whole frame's payload, at most limit bytes.
func (fr *frameReader) payload(length uint64, limit int) ([]byte, error) {
	if length > uint64(limit) {
		return nil, &Error{ErrCodeExcessiveLoad, fmt.Sprintf("frame of %d bytes", length)}
	}
	b := make([]byte, length)
	if _, err := io.ReadFull(fr.r, b); err != nil {
		return nil, unexpected(err)
	}
	return b, nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return &Error{ErrCodeFrameError, "stream ended inside a frame"}
	}
	return err
}

// settings parses a SETTINGS payload (§7.2.4).
func parseSettings(b []byte) (map[uint64]uint64, error) {
	m := map[uint64]uint64{}
	r := bytes.NewReader(b)
	for r.Len() > 0 {
		id, err := readVarint(r)
		if err != nil {
			return nil, &Error{ErrCodeFrameError, "truncated SETTINGS"}
		}
		v, err := readVarint(r)
		if err != nil {
			return nil, &Error{ErrCodeFrameError, "truncated SETTINGS"}
		}
		if id >= 0x02 && id <= 0x05 {
			return nil, &Error{ErrCodeSettingsError, fmt.Sprintf("HTTP/2 setting 0x%x", id)}
		}
		if _, dup := m[id]; dup {
			return nil, &Error{ErrCodeSettingsError, fmt.Sprintf("setting 0x%x twice", id)}
		}
		m[id] = v
	}
	return m, nil
}
