package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ErrNewerMajor: the document's schema_version has a major newer than this
// build reads; CheckDocumentStream returns it with what it could read, and
// a collector stores such a run raw.
var ErrNewerMajor = errors.New("newer schema major")

// CheckDocumentStream validates one JSON document read from r, with the
// result CheckDocument gives, but holds only one record (and the fields
// besides records) at a time: the records array is read element by
// element, so a collector's memory per upload does not grow with the
// document. Errors reading r pass through unchanged.
func CheckDocumentStream(r io.Reader) (RunSummary, error) {
	s, err := compiled()
	if err != nil {
		return RunSummary{}, fmt.Errorf("compile envelope schema: %w", err)
	}
	dec := json.NewDecoder(r)
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return RunSummary{}, notJSON(err)
	}
	if tok != json.Delim('{') {
		return RunSummary{}, &InvalidError{Reason: "want a JSON object"}
	}
	rest := map[string]json.RawMessage{}
	var (
		records  int64
		array    bool  // records was an array
		firstErr error // of the records, reported after the other fields'
	)
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return RunSummary{}, notJSON(err)
		}
		key, _ := t.(string)
		if _, dup := rest[key]; dup || (key == "records" && array) {
			return RunSummary{}, &InvalidError{Pointer: "/" + escapePointer(key), Reason: "duplicate key"}
		}
		if key != "records" {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return RunSummary{}, notJSON(err)
			}
			rest[key] = raw
			continue
		}
		if t, err = dec.Token(); err != nil {
			return RunSummary{}, notJSON(err)
		}
		if t != json.Delim('[') {
			return RunSummary{}, &InvalidError{Pointer: "/records", Reason: "want an array"}
		}
		array = true
		for dec.More() {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return RunSummary{}, notJSON(err)
			}
			if firstErr == nil {
				if err := checkRecord(s, raw); err != nil {
					firstErr = atRecord(err, records)
				}
			}
			records++
		}
		if _, err := dec.Token(); err != nil { // ]
			return RunSummary{}, notJSON(err)
		}
		rest[key] = json.RawMessage("[]")
	}
	if _, err := dec.Token(); err != nil { // }
		return RunSummary{}, notJSON(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil || isSyntax(err) {
			return RunSummary{}, &InvalidError{Reason: "not JSON: data after the document"}
		}
		return RunSummary{}, err
	}
	b, err := json.Marshal(rest)
	if err != nil {
		return RunSummary{}, err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return RunSummary{}, &InvalidError{Reason: "not JSON: " + err.Error()}
	}
	obj := inst.(map[string]any)
	sum := summaryOf(obj)
	if m, ok := MajorOf(sum.SchemaVersion); ok && m > SchemaMajor {
		return sum, ErrNewerMajor
	}
	if err := s.doc.Validate(inst); err != nil {
		return RunSummary{}, schemaError(0, err)
	}
	if firstErr != nil {
		return RunSummary{}, firstErr
	}
	sum.Status, _ = obj["status"].(string)
	sum.FinishedAt = timeOf(obj["finished_at"])
	sum.Records = records
	return sum, nil
}

// checkRecord validates one element of records against $defs/record.
func checkRecord(s schemas, raw []byte) error {
	if recordFastPath() {
		if _, ok := recordType(raw); ok {
			return nil
		}
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return &InvalidError{Reason: "not JSON: " + err.Error()}
	}
	if err := s.record.Validate(inst); err != nil {
		return schemaError(0, err)
	}
	return nil
}

func atRecord(err error, i int64) error {
	var inv *InvalidError
	if errors.As(err, &inv) {
		return &InvalidError{Pointer: "/records/" + strconv.FormatInt(i, 10) + inv.Pointer, Reason: inv.Reason}
	}
	return err
}

func isSyntax(err error) bool {
	var se *json.SyntaxError
	var ute *json.UnmarshalTypeError
	return errors.As(err, &se) || errors.As(err, &ute) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// notJSON makes a decoding error invalid input; a read error passes.
func notJSON(err error) error {
	if isSyntax(err) {
		return &InvalidError{Reason: "not JSON: " + err.Error()}
	}
	return err
}

func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
