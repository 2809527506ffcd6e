package report

import (
	"encoding/json"
	"time"
)

// Envelope timestamps are UTC RFC 3339 with exactly nine fractional
// digits: time.Time's own JSON form drops trailing zeros and keeps the
// local offset, so equal-width, sortable, comparable strings need this.
const timestampLayout = "2006-01-02T15:04:05.000000000Z"

// wireHeader is Header as written: timestamps formatted, nil slices as [].
// It has no methods, so embedding it does not hijack marshalling.
type wireHeader struct {
	Type          string          `json:"type,omitempty"`
	SchemaVersion string          `json:"schema_version"`
	RunID         string          `json:"run_id"`
	ProbeID       string          `json:"probe_id"`
	Command       string          `json:"command"`
	Tool          Tool            `json:"tool"`
	Host          Host            `json:"host"`
	StartedAt     string          `json:"started_at"`
	Clock         Clock           `json:"clock"`
	Paths         []Path          `json:"paths"`
	Config        json.RawMessage `json:"config"`
}

func toWire(h Header, typ string) wireHeader {
	paths := h.Paths
	if paths == nil {
		paths = []Path{}
	}
	cfg := h.Config
	if len(cfg) == 0 {
		cfg = json.RawMessage("null")
	}
	return wireHeader{Type: typ, SchemaVersion: h.SchemaVersion, RunID: h.RunID, ProbeID: h.ProbeID,
		Command: h.Command, Tool: h.Tool, Host: h.Host, StartedAt: Timestamp(h.StartedAt),
		Clock: h.Clock, Paths: paths, Config: cfg}
}

// MarshalJSON writes the document with envelope timestamps.
func (d Document) MarshalJSON() ([]byte, error) {
	recs := d.Records
	if recs == nil {
		recs = []json.RawMessage{}
	}
	return json.Marshal(struct {
		wireHeader
		FinishedAt string            `json:"finished_at"`
		Status     Status            `json:"status"`
		Reason     string            `json:"reason,omitempty"`
		Records    []json.RawMessage `json:"records"`
	}{toWire(d.Header, ""), Timestamp(d.FinishedAt), d.Status, d.Reason, recs})
}

func (l headerLine) MarshalJSON() ([]byte, error) { return json.Marshal(toWire(l.Header, l.Type)) }

func (l trailerLine) MarshalJSON() ([]byte, error) {
	type plain trailerLine // drops this method
	return json.Marshal(struct {
		plain
		FinishedAt string `json:"finished_at"`
	}{plain(l), Timestamp(l.FinishedAt)})
}

// Timestamp formats times as the envelope wants them: UTC, RFC 3339, ns.
func Timestamp(t time.Time) string { return t.UTC().Format(timestampLayout) }

// Time is a time.Time that marshals as an envelope timestamp, for records'
// own times (a plain time.Time drops trailing zeros and keeps its offset).
type Time struct{ time.Time }

// MarshalJSON writes UTC RFC 3339 with nine fractional digits.
func (t Time) MarshalJSON() ([]byte, error) { return json.Marshal(Timestamp(t.Time)) }
