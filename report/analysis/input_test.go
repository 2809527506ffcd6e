package analysis

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const hdr = `{"type":"header","schema_version":"1.1","run_id":"0f8c3f6e-3c1a-4c36-9a55-1f2d1c5e7a10","probe_id":"p","command":"survey","tool":{"name":"mptester","version":"v","commit":"c"},"host":{"os":"linux","arch":"amd64","hostname_hash":"0123456789abcdef"},"started_at":"2026-11-22T10:00:00.500000000Z","clock":{"synchronized":null},"paths":[],"config":null}`
const rec = `{"type":"rtt","ms":1}`
const trl = `{"type":"trailer","run_id":"0f8c3f6e-3c1a-4c36-9a55-1f2d1c5e7a10","status":"ok","records":2,"finished_at":"2026-11-22T10:00:03.000000123Z"}`

func read(t *testing.T, b []byte) (*Run, int, error) {
	t.Helper()
	n := 0
	run, err := Read("f.jsonl", bytes.NewReader(b), func(Record) error { n++; return nil })
	return run, n, err
}

// TestReadEveryShippedVersion: the goldens of schema 1.0 and 1.1, streams
// and documents, plain and gzip'd, read with every record counted.
func TestReadEveryShippedVersion(t *testing.T) {
	files, err := filepath.Glob("../testdata/*.json*")
	require.NoError(t, err)
	old, _ := filepath.Glob("../testdata/v1.0/*.json*")
	files = append(files, old...)
	require.GreaterOrEqual(t, len(files), 5)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, gz := range []bool{false, true} {
			in := b
			if gz {
				var buf bytes.Buffer
				zw := gzip.NewWriter(&buf)
				zw.Write(b)
				zw.Close()
				in = buf.Bytes()
			}
			run, n, err := read(t, in)
			require.NoError(t, err, f)
			assert.Equal(t, gz, run.Gzip)
			assert.False(t, run.Truncated, f)
			assert.NotEmpty(t, run.Status, f)
			assert.Positive(t, n, f)
			assert.EqualValues(t, n, run.Records, f)
			assert.Len(t, run.SHA256, 64)
		}
	}
}

func TestReadTruncatedIsReportedNotSkipped(t *testing.T) {
	run, n, err := read(t, []byte(hdr+"\n"+rec+"\n"+rec+"\n"))
	require.NoError(t, err)
	assert.True(t, run.Truncated)
	assert.Equal(t, 2, n)
	assert.Contains(t, run.TruncatedNote, "after line 3 without a trailer")

	run, n, err = read(t, []byte(hdr+"\n"+rec+"\n"+`{"type":"rtt","m`))
	require.NoError(t, err)
	assert.True(t, run.Truncated)
	assert.Equal(t, 1, n)
	assert.Contains(t, run.TruncatedNote, "line 3 cut mid-write")
}

func TestReadBadInputNamesFileAndLine(t *testing.T) {
	for in, want := range map[string]string{
		"":               "f.jsonl:1: empty file",
		"hello":          "f.jsonl:1: not a result file",
		rec + "\n" + trl: `f.jsonl:1: a "rtt" record where the header must be first`,
		hdr + "\n" + "{nope\n" + rec + "\n" + trl:               "f.jsonl:2: not JSON",
		hdr + "\n" + rec + "\n\n" + trl:                         "f.jsonl:3: empty line",
		hdr + "\n" + `{"ms":1}` + "\n" + trl:                    "f.jsonl:2: record has no type",
		hdr + "\n" + rec + "\n" + hdr:                           "f.jsonl:3: a second header",
		hdr + "\n" + rec + "\n" + trl:                           "f.jsonl:3: trailer counts 2 records, the stream holds 1",
		hdr + "\n" + rec + "\n" + rec + "\n" + trl + "\n" + rec: "f.jsonl:5: data after the trailer",
		strings.Replace(hdr, `"1.1"`, `"2.0"`, 1):               "f.jsonl:1: schema_version 2.0: this build reads 1.x",
		`{"a":1}`: "f.jsonl: not a result file: a JSON object without header and records",
		`{"schema_version":"1.1","command":"run","records":[{"ms":1}],"status":"ok"}`: "f.jsonl: records[0] is not a typed record",
		`{"schema_version":"1.1","command":"run","records":[]`:                        "f.jsonl: document cut short",
	} {
		_, _, err := read(t, []byte(in))
		require.Error(t, err, in)
		assert.True(t, errors.Is(err, ErrInput), in)
		assert.Contains(t, err.Error(), want, in)
	}
}

// FuzzRead: no input panics or loops; an accepted one counts its records.
func FuzzRead(f *testing.F) {
	for _, s := range []string{hdr + "\n" + rec + "\n" + rec + "\n" + trl + "\n", hdr + "\n" + rec, `{"schema_version":"1.0","command":"run","status":"ok","records":[{"type":"x"}]}`, "", "{", "\x1f\x8b"} {
		f.Add([]byte(s))
	}
	b, _ := os.ReadFile("../testdata/v1.0/run.json")
	f.Add(b)
	f.Fuzz(func(t *testing.T, in []byte) {
		n := 0
		run, err := Read("fuzz", bytes.NewReader(in), func(Record) error { n++; return nil })
		if err != nil {
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("error without file and line: %v", err)
			}
			return
		}
		if int64(n) != run.Records {
			t.Fatalf("%d records given, %d counted", n, run.Records)
		}
	})
}
