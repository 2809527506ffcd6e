package collect

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/mptester/mptester/internal/fsutil"
)

// rawDir keeps every upload as the probe wrote it, immutable: written to
// raw/<id[:2]>/.tmp-*, fsynced, renamed to raw/<id[:2]>/<id>.<sha256> and
// the directory fsynced, all before the index row is committed and the probe answered.
// The name carries the content hash, so two uploads of one run_id with
// different content never overwrite each other (one of them gets 409).
type rawDir struct{ root string }

func newRawDir(root string) (*rawDir, error) {
	for _, d := range []string{root, filepath.Join(root, "raw")} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, err
		}
	}
	// Temporaries of uploads cut off by a crash were never acknowledged.
	// (One collector per data directory.)
	stale, _ := filepath.Glob(filepath.Join(root, "raw", "*", ".tmp-*"))
	for _, f := range stale {
		os.Remove(f)
	}
	return &rawDir{root: root}, nil
}

// create starts an upload of runID in the directory it will end in (a
// rename within one directory; and creations spread over 256 directories
// rather than contending for one).
func (d *rawDir) create(runID string) (*os.File, error) {
	dir, err := d.dirOf(runID)
	if err != nil {
		return nil, err
	}
	return os.CreateTemp(dir, ".tmp-*")
}

// dirOf returns (creating it durably) the directory of runID's files.
func (d *rawDir) dirOf(runID string) (string, error) {
	dir := filepath.Join(d.root, "raw", runID[:2])
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		if err := os.Mkdir(dir, 0o750); err != nil && !os.IsExist(err) {
			return "", err
		}
		if err := fsutil.SyncDir(filepath.Dir(dir)); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// commit makes f durable under its final name and returns that name,
// relative to the root.
func (d *rawDir) commit(f *os.File, runID, sha string) (string, error) {
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("fsync upload: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	rel := filepath.Join("raw", runID[:2], runID+"."+sha)
	dir, err := d.dirOf(runID)
	if err != nil {
		return "", err
	}
	if err := os.Rename(f.Name(), filepath.Join(d.root, rel)); err != nil {
		return "", err
	}
	if err := fsutil.SyncDir(dir); err != nil {
		return "", err
	}
	return rel, nil
}

func (d *rawDir) open(rel string) (*os.File, error) { return os.Open(filepath.Join(d.root, rel)) }

func (d *rawDir) remove(rel string) { _ = os.Remove(filepath.Join(d.root, rel)) }
