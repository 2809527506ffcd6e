// Package rawstore keeps the collector's raw uploads, immutable, in a
// local directory (the default) or an S3-compatible object store. Keys
// are content-addressed (raw/<id[:2]>/<run_id>.<sha256>): two uploads of
// one run with different content never share a key, and an object is
// never overwritten (a local hard link, an S3 conditional create).
package rawstore

import (
	"context"
	"errors"
	"io"
	"path"
	"regexp"
	"strings"
	"time"
)

// ErrNotFound: no object under the key.
var ErrNotFound = errors.New("raw object not found")

// Backend is where raw uploads live. Every method is safe for concurrent
// use.
type Backend interface {
	// Create starts an object for runID: written, then committed under
	// its checksum, or aborted.
	Create(ctx context.Context, runID string) (Object, error)
	// Open streams a committed object; ErrNotFound if there is none.
	Open(ctx context.Context, key string) (io.ReadCloser, error)
	// Remove deletes an object (one that no index row names).
	Remove(ctx context.Context, key string) error
	// List calls fn for every committed object, in no particular order.
	List(ctx context.Context, fn func(Info) error) error
	// Check says whether the store is reachable (for /healthz).
	Check(ctx context.Context) error
	// String names the store for logs, never with credentials.
	String() string
}

// Object is an upload on its way into a Backend.
type Object interface {
	io.Writer
	// ReadAt reads back what was written (a JSON document is validated
	// once whole).
	io.ReaderAt
	// Commit makes the object durable under Key(runID, sha256) and
	// returns the key only once the store has confirmed the object and
	// its checksum. An existing object under the key (the same content)
	// is kept, not overwritten.
	Commit(ctx context.Context, sha256 string) (string, error)
	// Abort discards an object that was not committed.
	Abort()
}

// Info describes a stored object.
type Info struct {
	Key      string
	Size     int64
	Modified time.Time
}

// Key is the content-addressed key of a run's raw upload.
func Key(runID, sha256 string) string {
	return path.Join("raw", runID[:2], runID+"."+sha256)
}

var keyPattern = regexp.MustCompile(`^raw/([0-9a-f]{2})/([0-9a-f-]{36})\.([0-9a-f]{64})$`)

// ParseKey returns the run and checksum a key names; ok is false for
// anything that is not a committed object's key.
func ParseKey(key string) (runID, sha256 string, ok bool) {
	m := keyPattern.FindStringSubmatch(key)
	if m == nil || !strings.HasPrefix(m[2], m[1]) {
		return "", "", false
	}
	return m[2], m[3], true
}
