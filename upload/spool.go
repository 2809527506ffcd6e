// Package upload is the probe side of the fleet pipeline: a spool
// directory that keeps every result until the collect server has
// acknowledged it with a matching hash, and the client that drains it.
//
// Lessons from the fleets of study 000 §II: RIPE Atlas deletes a result
// only once the controller answered OK; OONI keeps nothing after a 200 that
// did not store, and never re-submits. Here a file leaves the spool only
// after a 2xx receipt whose sha256 equals the file's.
package upload

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mptester/mptester/internal/fsutil"
)

// Spool layout: tmp/ (being written), new/ (complete, pending upload),
// rejected/ (refused by the server, with its answer), lock, dropped.
const (
	dirTmp      = "tmp"
	dirNew      = "new"
	dirRejected = "rejected"
	answerExt   = ".answer.json"
)

// Quota bounds a spool during a long outage: the oldest results go first.
type Quota struct {
	MaxBytes int64         // 0: unbounded
	MaxAge   time.Duration // 0: unbounded
}

// Spool is a directory of results waiting for upload.
type Spool struct {
	dir   string
	quota Quota
	now   func() time.Time
	// stale is what OpenSpool removed from tmp/: results a process cut
	// off (killed, or out of space) never finished writing.
	stale int
	// refused marks, for this process, results the collector refused
	// that could not be moved to rejected/ (a full disk): never sent
	// again before the others, never blocking them.
	refused map[string]string
	// unsaved counts drops not yet added on disk, reported drops not yet
	// subtracted (the counter could not be written, a full disk): never
	// lost, never reported twice by this process.
	unsaved, reported int64
}

// StaleTmp is how long a file in tmp/ may go unwritten before OpenSpool
// takes it for the leftover of a process that died writing it.
const StaleTmp = time.Hour

// Item is one spooled result.
type Item struct {
	Name    string    `json:"name"`
	RunID   string    `json:"run_id"`
	Bytes   int64     `json:"bytes"`
	ModTime time.Time `json:"spooled_at"`
	// Answer is the server's answer to a rejected result.
	Answer string `json:"answer,omitempty"`
	path   string
}

// OpenSpool creates the spool's directories (0700: results name the host's
// paths and addresses).
func OpenSpool(dir string, q Quota) (*Spool, error) {
	for _, d := range []string{dir, filepath.Join(dir, dirTmp), filepath.Join(dir, dirNew), filepath.Join(dir, dirRejected)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("spool: %w", err)
		}
	}
	s := &Spool{dir: dir, quota: q, now: time.Now, refused: map[string]string{}}
	s.stale = s.cleanTmp()
	return s, nil
}

// cleanTmp removes the files of tmp/ unwritten for StaleTmp (a result
// being written now is younger) and returns how many it removed.
func (s *Spool) cleanTmp() int {
	ents, err := os.ReadDir(filepath.Join(s.dir, dirTmp))
	if err != nil {
		return 0
	}
	n := 0
	for _, de := range ents {
		fi, err := de.Info()
		if err != nil || fi.IsDir() || s.now().Sub(fi.ModTime()) < StaleTmp {
			continue
		}
		if os.Remove(filepath.Join(s.dir, dirTmp, de.Name())) == nil {
			n++
		}
	}
	return n
}

// Tmp is what tmp/ holds now (results being written, or leftovers younger
// than StaleTmp) and how many leftovers OpenSpool removed.
func (s *Spool) Tmp() (now []Item, removed int, err error) {
	now, err = s.list(dirTmp)
	return now, s.stale, err
}

// Dir is the spool's directory.
func (s *Spool) Dir() string { return s.dir }

// Entry is a result being written into the spool.
type Entry struct {
	s    *Spool
	f    *os.File
	name string
}

// Create starts a result for runID; ext is ".jsonl" or ".json".
func (s *Spool) Create(runID, ext string) (*Entry, error) {
	if runID == "" || strings.ContainsAny(runID, `/\.`) {
		return nil, fmt.Errorf("spool: bad run id %q", runID)
	}
	name := runID + ext
	f, err := os.OpenFile(filepath.Join(s.dir, dirTmp, name), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	return &Entry{s: s, f: f, name: name}, nil
}

func (e *Entry) Write(p []byte) (int, error) { return e.f.Write(p) }

// Commit makes the result durable and pending: fsync, rename into new/,
// fsync new/. Then the quota is applied (this result is the newest).
func (e *Entry) Commit() error {
	if err := e.f.Sync(); err != nil {
		e.f.Close()
		return fmt.Errorf("spool: fsync: %w", err)
	}
	if err := e.f.Close(); err != nil {
		return err
	}
	if err := os.Rename(e.f.Name(), filepath.Join(e.s.dir, dirNew, e.name)); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	if err := fsutil.SyncDir(filepath.Join(e.s.dir, dirNew)); err != nil {
		return err
	}
	_, err := e.s.enforceQuota()
	return err
}

// Abort drops an unfinished result.
func (e *Entry) Abort() {
	e.f.Close()
	os.Remove(e.f.Name())
}

// Pending lists new/, oldest first.
func (s *Spool) Pending() ([]Item, error) { return s.list(dirNew) }

// sendable is Pending without the results this process marked refused.
func (s *Spool) sendable() ([]Item, error) {
	items, err := s.Pending()
	return slices.DeleteFunc(items, func(it Item) bool { _, ok := s.refused[it.Name]; return ok }), err
}

// Rejected lists rejected/ with the server's answers.
func (s *Spool) Rejected() ([]Item, error) {
	items, err := s.list(dirRejected)
	for i := range items {
		b, _ := os.ReadFile(items[i].path + answerExt)
		items[i].Answer = CollectorText(b, 4096) // the collector's words, shown by upload --status
	}
	return items, err
}

func (s *Spool) list(sub string) ([]Item, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, sub))
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	items := []Item{}
	for _, de := range ents {
		if de.IsDir() || strings.HasSuffix(de.Name(), answerExt) {
			continue
		}
		fi, err := de.Info()
		if err != nil {
			continue // removed meanwhile
		}
		runID, _, _ := strings.Cut(de.Name(), ".")
		items = append(items, Item{Name: de.Name(), RunID: runID, Bytes: fi.Size(), ModTime: fi.ModTime(), path: filepath.Join(s.dir, sub, de.Name())})
	}
	sort.Slice(items, func(i, j int) bool {
		if !items[i].ModTime.Equal(items[j].ModTime) {
			return items[i].ModTime.Before(items[j].ModTime)
		}
		return items[i].Name < items[j].Name
	})
	return items, nil
}

// Open reads a pending item.
func (s *Spool) Open(it Item) (*os.File, error) { return os.Open(it.path) }

// Done removes an acknowledged item.
func (s *Spool) Done(it Item) error {
	if err := os.Remove(it.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return fsutil.SyncDir(filepath.Dir(it.path))
}

// Reject moves an item the server refused into rejected/ with its answer.
// When that fails (a full disk) the item is marked refused for this
// process: skipped by the drains, so it blocks nothing.
func (s *Spool) Reject(it Item, answer []byte) error {
	dst := filepath.Join(s.dir, dirRejected, it.Name)
	if err := os.WriteFile(dst+answerExt, answer, 0o600); err != nil {
		os.Remove(dst + answerExt) // no empty or cut answer left behind
		s.refused[it.Name] = string(answer)
		return err
	}
	if err := os.Rename(it.path, dst); err != nil {
		os.Remove(dst + answerExt)
		s.refused[it.Name] = string(answer)
		return err
	}
	return errors.Join(fsutil.SyncDir(filepath.Join(s.dir, dirRejected)), fsutil.SyncDir(filepath.Join(s.dir, dirNew)))
}

// enforceQuota drops the oldest pending results beyond the quota and
// counts them (reported with the next upload). It returns how many went.
func (s *Spool) enforceQuota() (int, error) {
	if s.quota.MaxBytes <= 0 && s.quota.MaxAge <= 0 {
		return 0, nil
	}
	items, err := s.Pending()
	if err != nil {
		return 0, err
	}
	var total int64
	for _, it := range items {
		total += it.Bytes
	}
	dropped := 0
	for i, it := range items {
		tooOld := s.quota.MaxAge > 0 && s.now().Sub(it.ModTime) > s.quota.MaxAge
		tooBig := s.quota.MaxBytes > 0 && total > s.quota.MaxBytes && i < len(items)-1 // never the newest
		if !tooOld && !tooBig {
			continue
		}
		if err := os.Remove(it.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return dropped, err
		}
		total -= it.Bytes
		dropped++
	}
	if dropped > 0 {
		if err := s.addDropped(int64(dropped)); err != nil {
			return dropped, err
		}
	}
	return dropped, nil
}

// Dropped is how many results the quota dropped and no receipt reported yet.
func (s *Spool) Dropped() int64 {
	return max(s.droppedOnDisk()+s.unsaved-s.reported, 0)
}

func (s *Spool) droppedOnDisk() int64 {
	b, err := os.ReadFile(filepath.Join(s.dir, "dropped"))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// addDropped counts n results the quota dropped (saveDropped).
func (s *Spool) addDropped(n int64) error {
	s.unsaved += n
	return s.saveDropped()
}

// reportedDropped subtracts n drops a receipt acknowledged (saveDropped).
func (s *Spool) reportedDropped(n int64) error {
	s.reported += n
	return s.saveDropped()
}

// saveDropped writes the persistent counter with the changes memory
// holds. If it cannot be rewritten (a full disk: the atomic write needs a
// new file), it is overwritten in place, and failing that the difference
// between what it should hold and what it holds is kept in memory: the
// drops are neither lost nor reported twice by this process.
func (s *Spool) saveDropped() error {
	v := max(s.droppedOnDisk()+s.unsaved-s.reported, 0)
	body := []byte(strconv.FormatInt(v, 10) + "\n")
	p := filepath.Join(s.dir, "dropped")
	err := fsutil.WriteFileAtomic(p, body, 0o600)
	if err != nil {
		// In place: truncating frees the block the write then takes.
		err = errors.Join(err, os.WriteFile(p, body, 0o600))
		if b, rerr := os.ReadFile(p); rerr == nil && string(b) == string(body) {
			err = nil
		}
	}
	s.unsaved, s.reported = 0, 0
	if err != nil {
		// Whatever the failed writes left (a cut or empty file reads 0).
		if d := v - s.droppedOnDisk(); d > 0 {
			s.unsaved = d
		} else {
			s.reported = -d
		}
	}
	return err
}

var _ io.Writer = (*Entry)(nil)
