package report

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// InvalidError says where a run first breaks the schema: the line (1-based
// in a JSON Lines stream, 0 for a document) and the JSON pointer of the
// offending value within it. A collector answers it to the probe as is.
type InvalidError struct {
	Line    int    `json:"line,omitempty"`
	Pointer string `json:"pointer"`
	Reason  string `json:"reason"`
}

func (e *InvalidError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s: %s", e.Line, pointerOrRoot(e.Pointer), e.Reason)
	}
	return fmt.Sprintf("%s: %s", pointerOrRoot(e.Pointer), e.Reason)
}

func pointerOrRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// RunSummary is what an index needs from a valid run without its records.
type RunSummary struct {
	SchemaVersion string
	RunID         string
	ProbeID       string
	Command       string
	StartedAt     time.Time
	FinishedAt    time.Time
	Status        string
	Records       int64
	Paths         []PathSummary
}

// PathSummary names one measured path of a run.
type PathSummary struct {
	Name string
	Kind string
}

// SchemaMajor is the major version this build reads; a run with a newer
// major is stored raw by a collector, never rejected.
var SchemaMajor = func() int { m, _ := MajorOf(SchemaVersion); return m }()

// MajorOf parses the major number of a schema_version such as "1.0".
func MajorOf(v string) (int, bool) {
	maj, _, ok := strings.Cut(v, ".")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(maj)
	return n, err == nil && n >= 0
}

// LineValidator validates a JSON Lines run one line at a time, with the
// stream rules of ValidateStream, so a collector checks an upload while it
// stores it and never holds the whole run.
type LineValidator struct {
	s        schemas
	n        int
	records  int64
	sum      RunSummary
	trailer  bool
	trailerN int64
	trailerR string
}

// NewLineValidator returns a validator expecting line 1 next.
func NewLineValidator() (*LineValidator, error) {
	s, err := compiled()
	if err != nil {
		return nil, fmt.Errorf("compile line schema: %w", err)
	}
	return &LineValidator{s: s}, nil
}

// Line checks the next line (without its newline).
func (v *LineValidator) Line(line []byte) error {
	v.n++
	n := v.n
	if len(bytes.TrimSpace(line)) == 0 {
		return &InvalidError{Line: n, Reason: "empty line"}
	}
	if v.trailer {
		return &InvalidError{Line: n, Reason: "data after the trailer"}
	}
	if n > 1 && recordFastPath() {
		if typ, ok := recordType(line); ok {
			return v.account(n, map[string]any{"type": typ})
		}
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
	if err != nil {
		return &InvalidError{Line: n, Reason: "not JSON: " + err.Error()}
	}
	if err := v.s.line.Validate(inst); err != nil {
		return schemaError(n, err)
	}
	obj := inst.(map[string]any) // the schema guarantees an object with a string type
	return v.account(n, obj)
}

func (v *LineValidator) account(n int, obj map[string]any) error {
	var err error
	switch obj["type"] {
	case TypeHeader:
		if n != 1 {
			return &InvalidError{Line: n, Pointer: "/type", Reason: "header is not the first line"}
		}
		v.sum = summaryOf(obj)
	case TypeTrailer:
		v.trailer = true
		v.trailerR, _ = obj["run_id"].(string)
		v.sum.Status, _ = obj["status"].(string)
		v.sum.FinishedAt = timeOf(obj["finished_at"])
		if v.trailerN, err = numberOf(obj["records"]); err != nil {
			return &InvalidError{Line: n, Pointer: "/records", Reason: err.Error()}
		}
		if v.trailerR != v.sum.RunID {
			return &InvalidError{Line: n, Pointer: "/run_id", Reason: fmt.Sprintf("trailer run_id %s differs from header run_id %s", v.trailerR, v.sum.RunID)}
		}
		if v.trailerN != v.records {
			return &InvalidError{Line: n, Pointer: "/records", Reason: fmt.Sprintf("trailer counts %d records, the stream holds %d", v.trailerN, v.records)}
		}
	default:
		if n == 1 {
			return &InvalidError{Line: 1, Pointer: "/type", Reason: "the first line must be the header"}
		}
		v.records++
	}
	return nil
}

// Finish checks the end of the stream and returns the run's summary.
func (v *LineValidator) Finish() (RunSummary, error) {
	switch {
	case v.n == 0:
		return RunSummary{}, &InvalidError{Line: 1, Reason: "empty stream: no header"}
	case !v.trailer:
		return RunSummary{}, &InvalidError{Line: v.n + 1, Reason: "no trailer: the run did not finish writing"}
	}
	s := v.sum
	s.Records = v.records
	return s, nil
}

// CheckDocument validates one JSON document and returns its summary.
func CheckDocument(b []byte) (RunSummary, error) {
	s, err := compiled()
	if err != nil {
		return RunSummary{}, fmt.Errorf("compile envelope schema: %w", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return RunSummary{}, &InvalidError{Reason: "not JSON: " + err.Error()}
	}
	if err := s.doc.Validate(inst); err != nil {
		return RunSummary{}, schemaError(0, err)
	}
	obj := inst.(map[string]any)
	sum := summaryOf(obj)
	sum.Status, _ = obj["status"].(string)
	sum.FinishedAt = timeOf(obj["finished_at"])
	if recs, ok := obj["records"].([]any); ok {
		sum.Records = int64(len(recs))
	}
	return sum, nil
}

func summaryOf(obj map[string]any) RunSummary {
	s := RunSummary{StartedAt: timeOf(obj["started_at"])}
	s.SchemaVersion, _ = obj["schema_version"].(string)
	s.RunID, _ = obj["run_id"].(string)
	s.ProbeID, _ = obj["probe_id"].(string)
	s.Command, _ = obj["command"].(string)
	paths, _ := obj["paths"].([]any)
	for _, p := range paths {
		m, _ := p.(map[string]any)
		name, _ := m["name"].(string)
		kind, _ := m["kind"].(string)
		s.Paths = append(s.Paths, PathSummary{Name: name, Kind: kind})
	}
	return s
}

func timeOf(v any) time.Time {
	s, _ := v.(string)
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t.UTC()
}

var english = message.NewPrinter(language.English)

// schemaError names the first failing value: the deepest first cause.
func schemaError(line int, err error) error {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &InvalidError{Line: line, Reason: err.Error()}
	}
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	var p strings.Builder
	for _, tok := range ve.InstanceLocation {
		p.WriteByte('/')
		p.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(tok))
	}
	return &InvalidError{Line: line, Pointer: p.String(), Reason: ve.ErrorKind.LocalizedString(english)}
}

// The record lines of a survey are most of its bytes, and their schema
// ($defs/record: an object whose "type" is a non-empty string other than
// header/trailer) needs no general validator: checking it directly is
// several times faster than building the instance for jsonschema. The fast
// path is on only while the embedded schemas are exactly the ones it was
// written for (their canonical hashes below); a changed schema turns it off
// and every line goes through jsonschema again.
const (
	recordDefSHA  = "6585b0d4f056a25e9fdbb224e1946d8d87817ce8e2cbd6eed03e9922ad6bcc06"
	lineSchemaSHA = "de1b0bff1314c0ee441967ac4b4a1e8e97ddf7fc540c0a6c24a825314866ddbb"
)

var recordFastPath = sync.OnceValue(func() bool {
	rec, line, err := schemaHashes()
	return err == nil && rec == recordDefSHA && line == lineSchemaSHA
})

// schemaHashes are the SHA-256 of the canonical JSON (encoding/json, sorted
// keys) of $defs/record and of the whole line schema.
func schemaHashes() (record, line string, err error) {
	canon := func(v any) string {
		b, _ := json.Marshal(v)
		sum := sha256.Sum256(b)
		return hex.EncodeToString(sum[:])
	}
	var env struct {
		Defs map[string]any `json:"$defs"`
	}
	b, err := schemaFS.ReadFile("schema/envelope.schema.json")
	if err != nil {
		return "", "", err
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return "", "", err
	}
	var ls any
	b, err = schemaFS.ReadFile("schema/line.schema.json")
	if err != nil {
		return "", "", err
	}
	if err := json.Unmarshal(b, &ls); err != nil {
		return "", "", err
	}
	return canon(env.Defs["record"]), canon(ls), nil
}

// recordType returns the type of a line that is a valid record by the
// schema; ok is false for anything else (header, trailer, invalid, or a
// key written with escapes), which then takes the general path and gets
// its precise error. After json.Valid it scans the top-level keys itself
// rather than building a map: the last "type" key counts, as it does for
// the general path.
func recordType(line []byte) (string, bool) {
	if !json.Valid(line) {
		return "", false
	}
	start := bytes.IndexFunc(line, func(r rune) bool { return r != ' ' && r != '\t' && r != '\r' && r != '\n' })
	if start < 0 || line[start] != '{' {
		return "", false
	}
	var (
		depth             int
		keyNext, valNext  bool
		keyIsType         bool
		typRaw            []byte
		typeSeen, typeStr bool
	)
	for i := start; i < len(line); i++ {
		switch c := line[i]; c {
		case '"':
			j := i + 1
			for line[j] != '"' {
				if line[j] == '\\' {
					j++
				}
				j++
			}
			str := line[i : j+1]
			switch {
			case depth == 1 && keyNext:
				if bytes.IndexByte(str, '\\') >= 0 {
					return "", false
				}
				keyIsType, keyNext = string(str) == `"type"`, false
			case depth == 1 && valNext:
				if keyIsType {
					typRaw, typeSeen, typeStr = str, true, true
				}
				valNext = false
			}
			i = j
		case '{', '[':
			if depth == 1 && valNext {
				if keyIsType {
					typeSeen, typeStr = true, false
				}
				valNext = false
			}
			depth++
			keyNext = depth == 1 && c == '{'
		case '}', ']':
			depth--
		case ':':
			valNext = depth == 1
		case ',':
			keyNext = depth == 1
		case ' ', '\t', '\r', '\n':
		default: // a number, true, false or null
			if depth == 1 && valNext {
				if keyIsType {
					typeSeen, typeStr = true, false
				}
				valNext = false
			}
		}
	}
	if !typeSeen || !typeStr {
		return "", false
	}
	var t string
	if json.Unmarshal(typRaw, &t) != nil || t == "" || t == TypeHeader || t == TypeTrailer {
		return "", false
	}
	return t, true
}
