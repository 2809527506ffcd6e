package patterns

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// The bulk object is a deterministic function of its size, so a client
// fetching byte ranges of it over several paths (MPHTTP, 003 §4.2) gets
// the same bytes on each and can compare the overlap of two ranges (003
// §4.3). Its content is bulkPeriod repeated; the period is not a power of
// two, so a range misplaced by a power-of-two offset differs.
const bulkPeriod = 256<<10 + 7

var bulkPattern0 = func() []byte {
	b := make([]byte, bulkPeriod)
	x := uint64(0x9e3779b97f4a7c15) // xorshift64: fixed seed, content never changes
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x >> 32)
	}
	return b
}()

// bulkModTime is the Last-Modified of every bulk object: fixed, so a
// validator never changes between requests.
var bulkModTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// BulkETag is the strong ETag of the bulk object of the given size.
func BulkETag(size int64) string { return fmt.Sprintf(`"bulk-%d-v1"`, size) }

// BulkBody is the content of the bulk object of size bytes, seekable so
// http.ServeContent can serve ranges of it.
type BulkBody struct {
	size, off int64
}

// NewBulkBody returns the bulk object of size bytes at offset 0.
func NewBulkBody(size int64) *BulkBody { return &BulkBody{size: size} }

func (b *BulkBody) Read(p []byte) (int, error) {
	if b.off >= b.size {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), b.size-b.off)]
	n := 0
	for n < len(p) {
		n += copy(p[n:], bulkPattern0[(b.off+int64(n))%bulkPeriod:])
	}
	b.off += int64(n)
	return n, nil
}

func (b *BulkBody) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += b.off
	case io.SeekEnd:
		offset += b.size
	}
	if offset < 0 {
		return b.off, errors.New("bulk body: negative offset")
	}
	b.off = offset
	return offset, nil
}

// writeTo writes the next n bytes (at most what is left) to w straight from
// the pattern, in pieces of up to 256 KiB.
func (b *BulkBody) writeTo(w io.Writer, n int64) (int64, error) {
	var done int64
	for n = min(n, b.size-b.off); done < n; {
		o := b.off % bulkPeriod
		k := min(n-done, bulkPeriod-o, 256<<10)
		m, err := w.Write(bulkPattern0[o : o+k])
		done += int64(m)
		b.off += int64(m)
		if err != nil {
			return done, err
		}
	}
	return done, nil
}
