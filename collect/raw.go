package collect

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// rawDir keeps every upload as the probe wrote it, immutable: written to
// tmp/, fsynced, renamed to raw/<id[:2]>/<id>.<sha256> and the directory
// fsynced, all before the index row is committed and the probe answered.
// The name carries the content hash, so two uploads of one run_id with
// different content never overwrite each other (one of them gets 409).
type rawDir struct{ root string }

func newRawDir(root string) (*rawDir, error) {
	for _, d := range []string{root, filepath.Join(root, "tmp"), filepath.Join(root, "raw")} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, err
		}
	}
	return &rawDir{root: root}, nil
}

func (d *rawDir) create() (*os.File, error) {
	return os.CreateTemp(filepath.Join(d.root, "tmp"), "upload-*")
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
	dir := filepath.Join(d.root, filepath.Dir(rel))
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		if err := os.Mkdir(dir, 0o750); err != nil && !os.IsExist(err) {
			return "", err
		}
		if err := syncDir(filepath.Dir(dir)); err != nil {
			return "", err
		}
	}
	if err := os.Rename(f.Name(), filepath.Join(d.root, rel)); err != nil {
		return "", err
	}
	if err := syncDir(dir); err != nil {
		return "", err
	}
	return rel, nil
}

func (d *rawDir) open(rel string) (*os.File, error) { return os.Open(filepath.Join(d.root, rel)) }

func (d *rawDir) remove(rel string) { _ = os.Remove(filepath.Join(d.root, rel)) }

// syncDir makes a rename or create in dir durable (POSIX: fsync the
// directory). Windows cannot fsync a directory; NTFS journals renames.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
