package collect

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/internal/fsutil"
)

// rawDir keeps every upload larger than inlineMax as the probe wrote it, immutable: written to
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

// openRaw opens a stored run's raw upload, from its file or the database.
func (s *Server) openRaw(ctx context.Context, run store.Run) (io.ReadCloser, error) {
	return store.OpenRaw(ctx, s.cfg.Store, s.raw.root, run)
}

func (d *rawDir) remove(rel string) { _ = os.Remove(filepath.Join(d.root, rel)) }

// inlineMax is the largest upload kept in the database (store.RawInline)
// instead of a file: a pattern run's envelope is a few kB, and a file
// each cost a create, a rename and two fsyncs (1.5 ms of CPU per
// envelope, most of it contending for directory locks), where rows share
// one group commit. 128 kB × MaxInFlight bounds the memory it takes.
const inlineMax = 128 << 10

// spool holds one upload while it streams in: in memory up to inlineMax,
// past that in a tmp file in the directory it will end in.
type spool struct {
	d     *rawDir
	runID string
	mem   []byte
	f     *os.File
	w     *bufio.Writer
}

func (d *rawDir) spool(runID string) *spool { return &spool{d: d, runID: runID} }

func (s *spool) Write(p []byte) (int, error) {
	if s.f == nil && len(s.mem)+len(p) <= inlineMax {
		s.mem = append(s.mem, p...)
		return len(p), nil
	}
	if s.f == nil {
		f, err := s.d.create(s.runID)
		if err != nil {
			return 0, err
		}
		s.f, s.w = f, bufio.NewWriterSize(f, 256<<10)
		if _, err := s.w.Write(s.mem); err != nil {
			return 0, err
		}
		s.mem = nil
	}
	return s.w.Write(p)
}

// flush makes everything written readable through ReadAt.
func (s *spool) flush() error {
	if s.w == nil {
		return nil
	}
	return s.w.Flush()
}

func (s *spool) ReadAt(p []byte, off int64) (int, error) {
	if s.f != nil {
		return s.f.ReadAt(p, off)
	}
	return bytes.NewReader(s.mem).ReadAt(p, off)
}

// commit makes the upload durable as a file and returns its name, or,
// when it stayed in memory, returns store.RawInline and the body for the
// index row's transaction to make durable.
func (s *spool) commit(sha string) (rel string, body []byte, err error) {
	if s.f == nil {
		return store.RawInline, s.mem, nil
	}
	rel, err = s.d.commit(s.f, s.runID, sha)
	s.f = nil
	return rel, nil, err
}

// discard removes what an upload that was not committed left behind.
func (s *spool) discard() {
	if s.f != nil {
		s.f.Close()
		os.Remove(s.f.Name())
	}
}
