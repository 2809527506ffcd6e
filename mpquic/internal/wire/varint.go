package wire

import (
	"errors"
	"math"
)

// MaxVarint is the largest value a variable-length integer holds (2^62-1).
const MaxVarint = 1<<62 - 1

var errVarint = errors.New("truncated variable-length integer")

// VarintLen is the minimal encoded length of v (RFC 9000 §16); v must not
// exceed MaxVarint.
func VarintLen(v uint64) int {
	switch {
	case v <= 63:
		return 1
	case v <= 16383:
		return 2
	case v <= 1073741823:
		return 4
	default:
		return 8
	}
}

// AppendVarint appends v in its minimal encoding. It panics above
// MaxVarint: every caller holds values it produced, so that is a bug.
func AppendVarint(b []byte, v uint64) []byte {
	switch VarintLen(v) {
	case 1:
		return append(b, byte(v))
	case 2:
		return append(b, 0x40|byte(v>>8), byte(v))
	case 4:
		return append(b, 0x80|byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	if v > MaxVarint {
		panic("mpquic: varint above 2^62-1")
	}
	return append(b, 0xc0|byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32),
		byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// ParseVarint decodes one variable-length integer from the front of b and
// returns it with the number of bytes it took.
func ParseVarint(b []byte) (uint64, int, error) {
	if len(b) == 0 {
		return 0, 0, errVarint
	}
	n := 1 << (b[0] >> 6)
	if len(b) < n {
		return 0, 0, errVarint
	}
	v := uint64(b[0] & 0x3f)
	for _, c := range b[1:n] {
		v = v<<8 | uint64(c)
	}
	return v, n, nil
}

// reader walks a byte slice; the first failure sticks so decoders check once.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *reader) varint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n, err := ParseVarint(r.b)
	if err != nil {
		r.fail(err)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) || n > math.MaxInt {
		r.fail(errTruncated)
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) byte() byte {
	v := r.bytes(1)
	if v == nil {
		return 0
	}
	return v[0]
}

var errTruncated = errors.New("truncated")
