package report

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

//go:embed schema/*.schema.json
var schemaFS embed.FS

// Schema identifiers (their $id); the files are embedded, never fetched.
const (
	EnvelopeSchemaID = "https://github.com/mptester/mptester/report/schema/envelope.schema.json"
	LineSchemaID     = "https://github.com/mptester/mptester/report/schema/line.schema.json"
)

// MaxLineSize bounds one JSON Lines line when validating a stream.
const MaxLineSize = 16 << 20

type schemas struct{ doc, line, record *jsonschema.Schema }

// noLoader refuses every URL: schemas come only from the embedded files.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema %s is not embedded", url)
}

var compiled = sync.OnceValues(func() (schemas, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(noLoader{})
	for id, file := range map[string]string{EnvelopeSchemaID: "schema/envelope.schema.json", LineSchemaID: "schema/line.schema.json"} {
		b, err := schemaFS.ReadFile(file)
		if err != nil {
			return schemas{}, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return schemas{}, fmt.Errorf("%s: %w", file, err)
		}
		if err := c.AddResource(id, doc); err != nil {
			return schemas{}, err
		}
	}
	var s schemas
	var err error
	if s.doc, err = c.Compile(EnvelopeSchemaID); err != nil {
		return schemas{}, err
	}
	if s.line, err = c.Compile(LineSchemaID); err != nil {
		return schemas{}, err
	}
	if s.record, err = c.Compile(EnvelopeSchemaID + "#/$defs/record"); err != nil {
		return schemas{}, err
	}
	return s, nil
})

// ValidateDocument checks one JSON document against envelope.schema.json.
func ValidateDocument(b []byte) error {
	s, err := compiled()
	if err != nil {
		return fmt.Errorf("compile envelope schema: %w", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("envelope is not JSON: %w", err)
	}
	if err := s.doc.Validate(inst); err != nil {
		return fmt.Errorf("envelope does not match schema: %w", err)
	}
	return nil
}

// ValidateStream checks a JSON Lines run: every line against
// line.schema.json, then what a per-line schema cannot say: exactly one
// header, first; exactly one trailer, last, with the header's run_id and
// the number of records.
func ValidateStream(r io.Reader) error {
	s, err := compiled()
	if err != nil {
		return fmt.Errorf("compile line schema: %w", err)
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLineSize)
	var (
		n, records     int
		runID          string
		trailerRecords int64 = -1
		trailerRunID   string
	)
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			return fmt.Errorf("line %d: empty line", n)
		}
		if trailerRecords >= 0 {
			return fmt.Errorf("line %d: data after the trailer", n)
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
		if err != nil {
			return fmt.Errorf("line %d: not JSON: %w", n, err)
		}
		if err := s.line.Validate(inst); err != nil {
			return fmt.Errorf("line %d does not match schema: %w", n, err)
		}
		obj := inst.(map[string]any) // the schema guarantees an object with a string type
		switch obj["type"] {
		case TypeHeader:
			if n != 1 {
				return fmt.Errorf("line %d: header is not the first line", n)
			}
			runID = obj["run_id"].(string)
		case TypeTrailer:
			trailerRunID = obj["run_id"].(string)
			if trailerRecords, err = numberOf(obj["records"]); err != nil {
				return fmt.Errorf("line %d: %w", n, err)
			}
		default:
			if n == 1 {
				return errors.New("line 1: the first line must be the header")
			}
			records++
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("line %d: %w", n+1, err)
	}
	switch {
	case n == 0:
		return errors.New("empty stream: no header")
	case trailerRecords < 0:
		return errors.New("no trailer: the run did not finish writing")
	case trailerRunID != runID:
		return fmt.Errorf("trailer run_id %s differs from header run_id %s", trailerRunID, runID)
	case trailerRecords != int64(records):
		return fmt.Errorf("trailer counts %d records, the stream holds %d", trailerRecords, records)
	}
	return nil
}

func numberOf(v any) (int64, error) {
	type number interface{ Int64() (int64, error) }
	if num, ok := v.(number); ok {
		if i, err := num.Int64(); err == nil {
			return i, nil
		}
	}
	return 0, fmt.Errorf("trailer records %v is not an integer", strings.TrimSpace(fmt.Sprint(v)))
}
