package collect

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/report"
)

var fuzzZstd, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))

// FuzzDecode is the ingest decoder alone (Content-Encoding, size limit,
// line or document validation), so coverage-guided fuzzing runs fast; the
// handler with its store is fuzzed by FuzzIngest. It never panics, and a
// body it accepts as parsed is one report's own validators accept.
func FuzzDecode(f *testing.F) {
	for _, name := range []string{"stream.jsonl", "document.json"} {
		b, err := os.ReadFile(filepath.Join("..", "report", "testdata", name))
		require.NoError(f, err)
		for mode := uint8(0); mode < 5; mode++ {
			f.Add(b, mode)
			f.Add(b[:len(b)/3], mode)
		}
	}
	f.Add([]byte(`{"type":"header","schema_version":"9.0"}`+"\n"), uint8(0))
	s := &Server{cfg: Config{Limits: Limits{MaxBytes: 1 << 20, MaxDocument: 1 << 20}}}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		body, enc := data, ""
		switch mode % 5 {
		case 1:
			var buf bytes.Buffer
			w := gzip.NewWriter(&buf)
			w.Write(data)
			w.Close()
			body, enc = buf.Bytes(), "gzip"
		case 2:
			body, enc = fuzzZstd.EncodeAll(data, nil), "zstd"
		case 3:
			enc = "gzip"
		case 4:
			enc = "zstd"
		}
		dec, err := decoder(enc, &limitReader{r: bytes.NewReader(body), n: 1 << 20}, 1<<20)
		require.NoError(t, err)
		defer dec.Close()
		tmp, err := os.CreateTemp(dir, "f")
		require.NoError(t, err)
		defer os.Remove(tmp.Name())
		defer tmp.Close()
		cw := &countWriter{}
		p, err := s.parse(io.TeeReader(&limitReader{r: dec, n: 1 << 20}, io.MultiWriter(tmp, cw)))
		if err == nil && p.document {
			p, err = s.parseDocument(tmp, cw.n)
		}
		if err != nil || !p.parsed || mode%5 > 2 {
			return
		}
		if p.contentType == "application/json" {
			require.NoError(t, report.ValidateDocument(data))
		} else {
			require.NoError(t, report.ValidateStream(bytes.NewReader(data)))
		}
		var inv *report.InvalidError
		require.False(t, errors.As(err, &inv))
	})
}
