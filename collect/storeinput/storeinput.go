// Package storeinput feeds a collect store's runs to the report (it lives
// under collect, so collect -> report is the only direction): the
// index's read API (store.ListRuns, a page at a time) chooses the runs by
// probe, command and start time, and each run's raw upload, as the server
// kept it (in its raw store, or in the index for a small one), goes
// through the same normaliser as a file would. Only
// one page of index rows and one run are held at a time.
package storeinput

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
	"time"

	"github.com/mptester/mptester/collect/rawstore"
	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/report"
	"github.com/mptester/mptester/report/analysis"
)

// Filter chooses runs; zero fields choose all.
type Filter struct {
	Probe        string
	Command      string // "run" or "survey"
	Since, Until time.Time
}

// Strings are the filter as the provenance table shows it.
func (f Filter) Strings() []string {
	var s []string
	if f.Probe != "" {
		s = append(s, "probe="+f.Probe)
	}
	if f.Command != "" {
		s = append(s, "type="+f.Command)
	}
	if !f.Since.IsZero() {
		s = append(s, "since="+f.Since.UTC().Format(time.RFC3339))
	}
	if !f.Until.IsZero() {
		s = append(s, "until="+f.Until.UTC().Format(time.RFC3339))
	}
	return s
}

// ParseTime reads a --since/--until value: RFC 3339 or a UTC date.
func ParseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q: want RFC 3339 (2026-11-01T00:00:00Z) or a date (2026-11-01)", s)
}

// Source is a collector's index and its raw store. Build it with New:
// every reader of a collector's runs (the fleet page, /v1/report, report
// --db) goes through the raw store, whichever backend holds the uploads.
type Source struct {
	store store.Store
	raw   rawstore.Backend
	// PageSize bounds the index rows held at once (store.MaxPage if 0).
	PageSize int
}

// New is the report input of a collector: its index st and the raw store
// raw (a directory, rawstore.ReadDir for a reader beside a running
// collector, or a bucket) holding the uploads not kept inline.
func New(st store.Store, raw rawstore.Backend) Source {
	return Source{store: st, raw: raw}
}

// Kind names the store's backend for provenance, never its credentials.
func Kind(dsn string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		return "db postgres"
	}
	return "db sqlite"
}

// Inputs yields the chosen runs in upload order; after the loop, the
// returned func gives the error that ended it, if any.
func (s Source) Inputs(ctx context.Context, f Filter) (iter.Seq[analysis.Input], func() error) {
	var err error
	seq := func(yield func(analysis.Input) bool) {
		rf := store.RunFilter{Probe: f.Probe, Command: f.Command, Since: f.Since, Until: f.Until, Limit: s.PageSize}
		for {
			var page []store.Run
			page, err = s.store.ListRuns(ctx, rf)
			if err != nil {
				return
			}
			for _, r := range page {
				if !yield(s.input(ctx, r)) {
					return
				}
			}
			if len(page) == 0 || (rf.Limit > 0 && len(page) < rf.Limit) {
				return
			}
			rf.After = page[len(page)-1].Seq
		}
	}
	return seq, func() error { return err }
}

func (s Source) input(ctx context.Context, r store.Run) analysis.Input {
	name := "db:" + r.RunID
	in := analysis.Input{Name: name, SHA256: r.SHA256,
		Header: report.Header{RunID: r.RunID, ProbeID: r.ProbeID, Command: r.Command, SchemaVersion: r.SchemaVersion, StartedAt: r.StartedAt}}
	if !r.Parsed {
		// Kept raw, but its records never passed the server's parser: listed,
		// not read, so the report says what it left out.
		in.Skip = "the server could not parse this upload"
		return in
	}
	in.Open = func() (io.ReadCloser, error) {
		switch r.RawPath {
		case "":
			return nil, errors.New("the store has no raw upload for this run")
		case store.RawInline:
			b, err := s.store.GetRaw(ctx, r.RunID)
			if err != nil {
				return nil, fmt.Errorf("raw upload in the store: %w", err)
			}
			return io.NopCloser(bytes.NewReader(b)), nil
		}
		rc, err := s.raw.Open(ctx, r.RawPath)
		if _, dir := s.raw.(*rawstore.Dir); dir && errors.Is(err, rawstore.ErrNotFound) {
			return nil, fmt.Errorf("raw upload: %w (is --data the collect server's data directory?)", err)
		}
		return rc, err
	}
	return in
}
