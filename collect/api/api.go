// Package api is the wire contract between probes and the collect server:
// the receipt and the headers a probe sends. Both sides import it; it
// imports nothing of the project.
package api

import "time"

// Receipt answers every accepted upload. A probe deletes its copy only
// when SHA256 equals the hash of what it sent.
type Receipt struct {
	RunID      string    `json:"run_id"`
	SHA256     string    `json:"sha256"`
	Bytes      int64     `json:"bytes"`
	StoredAt   time.Time `json:"stored_at"`
	ServerTime time.Time `json:"server_time"`
	Duplicate  bool      `json:"duplicate,omitempty"`
	// Status is "stored", or "unparsed" for a newer schema major kept raw.
	Status string `json:"status"`
	// UploadPath is the probe path the upload came over (HeaderPath).
	UploadPath string `json:"upload_path,omitempty"`
}

// Headers a probe sends with an upload.
const (
	HeaderPath    = "X-Mptester-Path"    // the path it uploads over
	HeaderBacklog = "X-Mptester-Backlog" // results still in its spool
	HeaderDropped = "X-Mptester-Dropped" // results its quota dropped since the last receipt
)

// RunsPath is the upload URL path of a run: PUT RunsPath + run_id.
const RunsPath = "/v1/runs/"
