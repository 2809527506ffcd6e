// Package report defines the one versioned JSON envelope every run emits,
// as a document or as a JSON Lines stream, and the tables built from it.
package report

import (
	"encoding/json"
	"time"
)

// SchemaVersion is bumped on any incompatible change of the envelope;
// report/schema/envelope.schema.json is its contract.
const SchemaVersion = "1.1"

// Status of a whole run.
type Status string

const (
	StatusOK      Status = "ok"
	StatusPartial Status = "partial" // interrupted, or some parts failed
	StatusInvalid Status = "invalid" // the network changed under the measurement
	StatusError   Status = "error"
)

// Tool identifies the binary that produced a run.
type Tool struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Commit  string `json:"commit"`
}

// Host describes the measuring machine without identifying it.
type Host struct {
	OS           string `json:"os"`
	Arch         string `json:"arch"`
	Kernel       string `json:"kernel,omitempty"`
	HostnameHash string `json:"hostname_hash"`
}

// Clock says whether timestamps can be compared across probes.
type Clock struct {
	// Synchronized is nil where the OS does not say.
	Synchronized *bool  `json:"synchronized"`
	Source       string `json:"source,omitempty"`
}

// Header is the part of the envelope known when a run starts.
type Header struct {
	SchemaVersion string          `json:"schema_version"`
	RunID         string          `json:"run_id"`
	ProbeID       string          `json:"probe_id"`
	Command       string          `json:"command"`
	Tool          Tool            `json:"tool"`
	Host          Host            `json:"host"`
	StartedAt     time.Time       `json:"started_at"`
	Clock         Clock           `json:"clock"`
	Paths         []Path          `json:"paths"`
	Config        json.RawMessage `json:"config"`
}

// Document is a whole run as one JSON document.
type Document struct {
	Header
	FinishedAt time.Time         `json:"finished_at"`
	Status     Status            `json:"status"`
	Reason     string            `json:"reason,omitempty"`
	Records    []json.RawMessage `json:"records"`
}

// Record types carry a "type" field; streaming output writes one per line.
const (
	TypeHeader  = "header"
	TypeTrailer = "trailer"
)
