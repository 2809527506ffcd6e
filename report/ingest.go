package report

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
	if err != nil {
		return &InvalidError{Line: n, Reason: "not JSON: " + err.Error()}
	}
	if err := v.s.line.Validate(inst); err != nil {
		return schemaError(n, err)
	}
	obj := inst.(map[string]any) // the schema guarantees an object with a string type
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
