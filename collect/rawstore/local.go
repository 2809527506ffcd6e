package rawstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mptester/mptester/internal/fsutil"
)

// Dir keeps objects as files under root: written to
// raw/<id[:2]>/.tmp-*, fsynced, linked to their key's name (link, not
// rename: an existing file is never replaced) and the directory fsynced.
type Dir struct{ root string }

// NewDir prepares root and removes temporaries of uploads a crash cut
// off (never acknowledged; one collector per directory).
func NewDir(root string) (*Dir, error) {
	for _, d := range []string{root, filepath.Join(root, "raw")} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, err
		}
	}
	stale, _ := filepath.Glob(filepath.Join(root, "raw", "*", ".tmp-*"))
	for _, f := range stale {
		os.Remove(f)
	}
	return &Dir{root: root}, nil
}

// ReadDir is root for readers (report --db): nothing is created and no
// temporary removed, since a running collector may own them.
func ReadDir(root string) *Dir { return &Dir{root: root} }

func (d *Dir) String() string { return "directory " + d.root }

// dirOf returns (creating it durably) the directory of runID's files.
func (d *Dir) dirOf(runID string) (string, error) {
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

// Create starts the file in the directory it will end in (a link within
// one directory; creations spread over 256 directories).
func (d *Dir) Create(_ context.Context, runID string) (Object, error) {
	dir, err := d.dirOf(runID)
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return nil, err
	}
	return &dirObject{d: d, f: f, runID: runID, dir: dir}, nil
}

type dirObject struct {
	d          *Dir
	f          *os.File
	runID, dir string
}

func (o *dirObject) Write(p []byte) (int, error)             { return o.f.Write(p) }
func (o *dirObject) ReadAt(p []byte, off int64) (int, error) { return o.f.ReadAt(p, off) }

func (o *dirObject) Commit(_ context.Context, sha string) (string, error) {
	defer o.Abort()
	if err := o.f.Sync(); err != nil {
		return "", fmt.Errorf("fsync upload: %w", err)
	}
	key := Key(o.runID, sha)
	final := filepath.Join(o.d.root, filepath.FromSlash(key))
	err := os.Link(o.f.Name(), final)
	if errors.Is(err, fs.ErrExist) {
		// The same content by its name; kept, and checked as far as its
		// size goes (reading it whole to hash it again is not worth it).
		old, serr := os.Stat(final)
		mine, merr := o.f.Stat()
		if serr != nil || merr != nil {
			return "", errors.Join(serr, merr)
		}
		if old.Size() != mine.Size() {
			return "", fmt.Errorf("%s exists with %d bytes, not this upload's %d", key, old.Size(), mine.Size())
		}
	} else if err != nil {
		// No hard links here: a rename, unless the key exists (same content).
		if _, serr := os.Lstat(final); !errors.Is(serr, fs.ErrNotExist) {
			return "", err
		}
		if err := os.Rename(o.f.Name(), final); err != nil {
			return "", err
		}
	}
	if err := fsutil.SyncDir(o.dir); err != nil {
		return "", err
	}
	return key, nil
}

// Abort removes the temporary (after Commit: its second name).
func (o *dirObject) Abort() {
	if o.f != nil {
		o.f.Close()
		os.Remove(o.f.Name())
		o.f = nil
	}
}

func (d *Dir) Open(_ context.Context, key string) (io.ReadCloser, error) {
	f, err := os.Open(filepath.Join(d.root, filepath.FromSlash(key)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	return f, err
}

func (d *Dir) Remove(_ context.Context, key string) error {
	err := os.Remove(filepath.Join(d.root, filepath.FromSlash(key)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

func (d *Dir) List(ctx context.Context, fn func(Info) error) error {
	subs, err := os.ReadDir(filepath.Join(d.root, "raw"))
	if err != nil {
		return err
	}
	for _, sub := range subs {
		if !sub.IsDir() {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(d.root, "raw", sub.Name()))
		if err != nil {
			return err
		}
		for _, e := range ents {
			if err := ctx.Err(); err != nil {
				return err
			}
			key := "raw/" + sub.Name() + "/" + e.Name()
			if _, _, ok := ParseKey(key); !ok {
				continue // temporaries, and anything that is not ours
			}
			fi, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return err
			}
			if err := fn(Info{Key: key, Size: fi.Size(), Modified: fi.ModTime()}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *Dir) Check(context.Context) error {
	_, err := os.Stat(filepath.Join(d.root, "raw"))
	return err
}
