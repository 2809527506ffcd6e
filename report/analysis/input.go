// Package analysis turns result files into the studies' tables: one
// normaliser reads every input (JSON Lines streams and run documents,
// gzip'd or not, schema 1.x), and sections in a registry aggregate the
// records as they stream past. It imports only report and the standard
// library, so report stays a leaf and renderers stay out of the model.
package analysis

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/mptester/mptester/report"
)

// ErrInput marks an input that cannot be read as a result file; the command
// maps it to a usage exit (2) before any output is written.
var ErrInput = errors.New("unreadable input")

// InputError names the file and line (0: the file as a whole) of a bad input.
type InputError struct {
	File   string
	Line   int
	Reason string
}

func (e *InputError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Reason)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Reason)
}

func (e *InputError) Unwrap() error { return ErrInput }

// Run is the provenance of one input: what it is and how it ended.
type Run struct {
	File          string
	SHA256        string // of the file's bytes as stored (compressed if gzip'd)
	Gzip          bool
	Form          string // "stream" (JSON Lines) or "document"
	Header        report.Header
	Status        report.Status // "" when the file was truncated
	Records       int64
	Truncated     bool   // a stream without its trailer: the run did not finish writing
	TruncatedNote string // where it ends
	Skipped       string // why the input was listed but not read
}

// Record is one record of a run, undecoded but for its type. Raw is valid
// only during the call it is given to: lines share one buffer.
type Record struct {
	Run  *Run
	Line int // 1-based line in a stream; 0 in a document
	Type string
	Raw  json.RawMessage
	memo *memo // the record decoded once for every section that reads it
}

// maxLine bounds one JSON Lines line (a probe record with its RTTs is far
// smaller; a pattern test with samples can reach a few MB).
const maxLine = 64 << 20

// Read normalises one result file, calling fn for every record in file
// order. Format and compression are detected from the content, not the
// name. A stream cut short (no trailer, or a last line cut mid-write)
// returns a Run marked Truncated, not an error: its records are counted.
func Read(name string, r io.Reader, fn func(Record) error) (*Run, error) {
	h := sha256.New()
	br := bufio.NewReaderSize(io.TeeReader(r, h), 64<<10)
	run := &Run{File: name}
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, &InputError{File: name, Reason: "bad gzip header: " + err.Error()}
		}
		run.Gzip = true
		br = bufio.NewReaderSize(zr, 64<<10)
	}
	first, err := firstByte(br)
	if err != nil {
		return nil, &InputError{File: name, Line: 1, Reason: err.Error()}
	}
	if first != '{' {
		return nil, &InputError{File: name, Line: 1, Reason: fmt.Sprintf("not a result file: starts with %q, want a JSON object", first)}
	}
	if err := detect(br, run, fn); err != nil {
		return nil, err
	}
	// Drain so the digest covers the whole file (a gzip trailer too).
	if _, err := io.Copy(io.Discard, br); err != nil && !run.Truncated {
		return nil, &InputError{File: name, Reason: "read: " + err.Error()}
	}
	run.SHA256 = hex.EncodeToString(h.Sum(nil))
	return run, nil
}

func firstByte(br *bufio.Reader) (byte, error) {
	for {
		b, err := br.ReadByte()
		if err == io.EOF {
			return 0, errors.New("empty file")
		}
		if err != nil {
			return 0, fmt.Errorf("read: %w", err)
		}
		if b != ' ' && b != '\t' && b != '\r' && b != '\n' {
			return b, br.UnreadByte()
		}
	}
}

// detect tells a stream (first line a complete "header" object) from a
// document (one object, possibly spread over lines) and reads it.
func detect(br *bufio.Reader, run *Run, fn func(Record) error) error {
	line, err := readLine(br, nil)
	if err != nil && err != io.EOF {
		return &InputError{File: run.File, Line: 1, Reason: err.Error()}
	}
	var probe struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(line, &probe) == nil {
		if probe.Type == report.TypeHeader {
			return readStream(br, line, run, fn)
		}
		if probe.Type != "" {
			return &InputError{File: run.File, Line: 1, Reason: fmt.Sprintf("a %q record where the header must be first", probe.Type)}
		}
	}
	return readDocument(io.MultiReader(bytes.NewReader(append(line, '\n')), br), run, fn)
}

// readLine reads the next line into buf (reused: a line is valid until the
// next call).
func readLine(br *bufio.Reader, buf []byte) ([]byte, error) {
	buf = buf[:0]
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > maxLine {
			return nil, fmt.Errorf("line longer than %d bytes", maxLine)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == nil {
			return bytes.TrimRight(buf, "\r\n"), nil
		}
		return buf, err
	}
}

func checkHeader(run *Run, line int) error {
	h := run.Header
	maj, ok := report.MajorOf(h.SchemaVersion)
	switch {
	case !ok:
		return &InputError{File: run.File, Line: line, Reason: fmt.Sprintf("header has no usable schema_version (%q)", h.SchemaVersion)}
	case maj != report.SchemaMajor:
		return &InputError{File: run.File, Line: line, Reason: fmt.Sprintf("schema_version %s: this build reads %d.x", h.SchemaVersion, report.SchemaMajor)}
	case h.Command == "":
		return &InputError{File: run.File, Line: line, Reason: "header names no command"}
	}
	return nil
}

type trailer struct {
	Type    string        `json:"type"`
	RunID   string        `json:"run_id"`
	Status  report.Status `json:"status"`
	Records *int64        `json:"records"`
}

func readStream(br *bufio.Reader, first []byte, run *Run, fn func(Record) error) error {
	if err := json.Unmarshal(first, &run.Header); err != nil {
		return &InputError{File: run.File, Line: 1, Reason: "bad header: " + err.Error()}
	}
	if err := checkHeader(run, 1); err != nil {
		return err
	}
	run.Form = "stream"
	n := 1
	done := false
	var buf []byte
	for {
		line, err := readLine(br, buf)
		buf = line
		if err != nil && err != io.EOF {
			return &InputError{File: run.File, Line: n + 1, Reason: err.Error()}
		}
		eof := err == io.EOF
		if len(bytes.TrimSpace(line)) == 0 {
			if eof {
				break
			}
			n++
			return &InputError{File: run.File, Line: n, Reason: "empty line"}
		}
		n++
		if done {
			return &InputError{File: run.File, Line: n, Reason: "data after the trailer"}
		}
		var t trailer
		if typ, ok := leadingType(line); ok && !eof && typ != report.TypeTrailer && typ != report.TypeHeader {
			// A record as the stream writes it: its type is read without
			// parsing the line twice; the sections decode (and so check)
			// what they read, Analyze checks the rest.
			t.Type = typ
		} else if jerr := json.Unmarshal(line, &t); jerr != nil {
			if eof { // the last line was cut mid-write
				run.Truncated = true
				run.TruncatedNote = fmt.Sprintf("line %d cut mid-write, no trailer", n)
				return nil
			}
			return &InputError{File: run.File, Line: n, Reason: "not JSON: " + jerr.Error()}
		}
		switch t.Type {
		case "":
			return &InputError{File: run.File, Line: n, Reason: "record has no type"}
		case report.TypeHeader:
			return &InputError{File: run.File, Line: n, Reason: "a second header: files concatenated?"}
		case report.TypeTrailer:
			if t.RunID != run.Header.RunID {
				return &InputError{File: run.File, Line: n, Reason: fmt.Sprintf("trailer run_id %s differs from the header's %s", t.RunID, run.Header.RunID)}
			}
			if t.Records == nil || *t.Records != run.Records {
				return &InputError{File: run.File, Line: n, Reason: fmt.Sprintf("trailer counts %s records, the stream holds %d", countOf(t.Records), run.Records)}
			}
			run.Status = t.Status
			done = true
		default:
			run.Records++
			if err := fn(Record{Run: run, Line: n, Type: t.Type, Raw: line}); err != nil {
				return lineErr(run, n, err)
			}
		}
		if eof {
			break
		}
	}
	if !done {
		run.Truncated = true
		run.TruncatedNote = fmt.Sprintf("ends after line %d without a trailer", n)
	}
	return nil
}

// leadingType returns the type of a line that starts {"type":"X", with X
// free of escapes; other lines are parsed whole.
func leadingType(line []byte) (string, bool) {
	const prefix = `{"type":"`
	if !bytes.HasPrefix(line, []byte(prefix)) || line[len(line)-1] != '}' {
		return "", false
	}
	rest := line[len(prefix):]
	end := bytes.IndexByte(rest, '"')
	if end <= 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return "", false
	}
	return string(rest[:end]), true
}

func countOf(p *int64) string {
	if p == nil {
		return "no"
	}
	return fmt.Sprint(*p)
}

// lineErr places a section's decoding error at the record's line.
func lineErr(run *Run, line int, err error) error {
	var ie *InputError
	if errors.As(err, &ie) {
		return err
	}
	return &InputError{File: run.File, Line: line, Reason: err.Error()}
}

// readDocument streams a run document: header fields are gathered until
// "records", whose elements are decoded one at a time, so a large document
// is never held whole.
func readDocument(r io.Reader, run *Run, fn func(Record) error) error {
	dec := json.NewDecoder(r)
	bad := func(why string) error { return &InputError{File: run.File, Reason: why} }
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return bad(fmt.Sprintf("not a result file: neither a JSON Lines header nor a run document (%v)", errOr(err, "not an object")))
	}
	head := map[string]json.RawMessage{}
	sawRecords := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return bad("bad document: " + err.Error())
		}
		key, _ := tok.(string)
		if key != "records" {
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return bad(fmt.Sprintf("bad document at %q: %v", key, err))
			}
			head[key] = v
			continue
		}
		sawRecords = true
		if err := docHeader(head, run); err != nil {
			return err
		}
		if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
			return bad("records is not an array")
		}
		for i := 0; dec.More(); i++ {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return bad(fmt.Sprintf("records[%d]: %v", i, err))
			}
			var t trailer
			if err := json.Unmarshal(raw, &t); err != nil || t.Type == "" || t.Type == report.TypeHeader || t.Type == report.TypeTrailer {
				return bad(fmt.Sprintf("records[%d] is not a typed record", i))
			}
			run.Records++
			if err := fn(Record{Run: run, Type: t.Type, Raw: raw}); err != nil {
				var ie *InputError
				if errors.As(err, &ie) {
					return err
				}
				return bad(fmt.Sprintf("records[%d] (%s): %v", i, t.Type, err))
			}
		}
		if _, err := dec.Token(); err != nil {
			return bad("records: " + err.Error())
		}
	}
	if _, err := dec.Token(); err != nil {
		return bad("document cut short: " + err.Error())
	}
	if !sawRecords {
		return bad("not a result file: a JSON object without header and records")
	}
	if v, ok := head["status"]; ok {
		if err := json.Unmarshal(v, &run.Status); err != nil {
			return bad("bad status: " + err.Error())
		}
	} else {
		return bad("document has no status")
	}
	if dec.More() {
		return bad("data after the document")
	}
	return nil
}

func errOr(err error, s string) string {
	if err != nil {
		return err.Error()
	}
	return s
}

func docHeader(head map[string]json.RawMessage, run *Run) error {
	var b strings.Builder
	b.WriteByte('{')
	first := true
	for k, v := range head {
		if !first {
			b.WriteByte(',')
		}
		first = false
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	if err := json.Unmarshal([]byte(b.String()), &run.Header); err != nil {
		return &InputError{File: run.File, Reason: "bad document header: " + err.Error()}
	}
	run.Form = "document"
	return checkHeader(run, 0)
}
