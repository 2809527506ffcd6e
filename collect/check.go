package collect

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/mptester/mptester/report/analysis"
)

// What the index and every reader assume of a stored run, checked at
// ingest so that what is acknowledged can always be read: no view,
// export or derived table may fail on one upload.
const (
	// MaxPaths bounds a run's paths (the header's, and those its records
	// name): the readers keep a run's paths as bits of a uint64.
	MaxPaths = 64
	// MaxNameBytes bounds a path's name and kind, the command and the
	// status: index columns and table cells, not free text.
	MaxNameBytes = 256
)

// checkUpload refuses (400, naming the record or field) an upload that
// the readers or the store could not take. Only a parsed upload is read
// through the sections; the index fields of every upload are checked.
func checkUpload(body io.ReaderAt, size int64, p parsed, nul *nulScan) error {
	bad := func(line int, ptr, reason string) error {
		return reject(http.StatusBadRequest, "invalid", apiError{Line: line, Pointer: ptr, Reason: reason})
	}
	if p.parsed {
		in := analysis.Input{Name: "upload", Open: func() (io.ReadCloser, error) {
			return io.NopCloser(io.NewSectionReader(body, 0, size)), nil
		}}
		err := analysis.Check(in, func(rec analysis.Record) error {
			var s nulScan
			_, _ = s.Write(rec.Raw)
			if s.found {
				return errors.New(nulReason)
			}
			return nil
		})
		var ie *analysis.InputError
		switch {
		case errors.As(err, &ie):
			return bad(ie.Line, "", "the reports cannot read it: "+ie.Reason)
		case err != nil:
			return err // not the upload's fault (a temporary file)
		}
	}
	if len(p.sum.Paths) > MaxPaths {
		return bad(p.line, "/paths", fmt.Sprintf("%d paths: at most %d", len(p.sum.Paths), MaxPaths))
	}
	fields := []struct{ ptr, v string }{{"/command", p.sum.Command}, {"/status", p.sum.Status}, {"/schema_version", p.sum.SchemaVersion}}
	for i, pa := range p.sum.Paths {
		fields = append(fields, struct{ ptr, v string }{"/paths/" + strconv.Itoa(i) + "/name", pa.Name},
			struct{ ptr, v string }{"/paths/" + strconv.Itoa(i) + "/kind", pa.Kind})
	}
	for _, f := range fields {
		if why := badName(f.v); why != "" {
			return bad(p.line, f.ptr, why)
		}
	}
	if nul.found {
		return bad(0, "", fmt.Sprintf("%s (at byte %d)", nulReason, nul.at))
	}
	return nil
}

const nulReason = `a string holds U+0000 (\u0000), which the store cannot keep`

// badName says what is wrong with an index field, or "".
func badName(s string) string {
	if len(s) > MaxNameBytes {
		return fmt.Sprintf("%d bytes: at most %d", len(s), MaxNameBytes)
	}
	if !utf8.ValidString(s) {
		return "not UTF-8"
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Sprintf("holds the control character %U, which names and terminals cannot take", r)
		}
	}
	return ""
}

// nulScan finds a NUL in JSON text as it streams past: the escape \u0000
// (after an odd number of backslashes, so not the text `\\u0000`) or a
// raw NUL byte.
type nulScan struct {
	off   int64 // bytes seen
	esc   bool  // the previous byte was an escaping backslash
	m     int   // bytes of "u0000" matched after one
	found bool
	at    int64 // offset of the first NUL
}

func (n *nulScan) Write(p []byte) (int, error) {
	if n.found {
		return len(p), nil
	}
	const pat = "u0000"
	for i, c := range p {
		if n.m > 0 {
			if c == pat[n.m] {
				if n.m++; n.m == len(pat) {
					n.found, n.at = true, n.off+int64(i)-int64(len(pat))
					break
				}
				continue
			}
			n.m = 0
		}
		switch {
		case n.esc:
			n.esc = false
			if c == 'u' {
				n.m = 1
			}
		case c == '\\':
			n.esc = true
		case c == 0:
			n.found, n.at = true, n.off+int64(i)
		}
		if n.found {
			break
		}
	}
	n.off += int64(len(p))
	return len(p), nil
}
