// Package storetest is the one test suite every store backend passes.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect/store"
)

// Run runs the suite; open must return the same database each time it is
// called within one subtest (it is called again to test reopening).
func Run(t *testing.T, newDSN func(t *testing.T) string) {
	ctx := context.Background()
	open := func(t *testing.T, dsn string) store.Store {
		s, err := store.Open(ctx, dsn)
		require.NoError(t, err)
		return s
	}
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 500, time.UTC)
	run := func(id, probe, sha string, i int) store.Run {
		return store.Run{RunID: id, ProbeID: probe, Command: "survey", SchemaVersion: "1.0", Status: "ok", Parsed: true,
			StartedAt: t0.Add(time.Duration(i) * time.Minute), FinishedAt: t0.Add(time.Duration(i)*time.Minute + time.Second),
			Records: int64(i), Bytes: 100, SHA256: sha, RawPath: "raw/" + id, ContentType: "application/x-ndjson",
			StoredAt: t0, Paths: []store.Path{{Name: "wlan0", Kind: "wifi"}, {Name: "wwan0", Kind: "cellular"}}}
	}

	t.Run("PutDuplicateConflict", func(t *testing.T) {
		s := open(t, newDSN(t))
		defer s.Close()
		require.NoError(t, s.AddProbe(ctx, "pi1", "h1", t0))
		r := run("r1", "pi1", "aaa", 1)
		got, o, err := s.PutRun(ctx, r, store.Report{Probe: "pi1", Seen: t0, Backlog: 3})
		require.NoError(t, err)
		assert.Equal(t, store.Stored, o)
		assert.Positive(t, got.Seq)
		_, o, err = s.PutRun(ctx, r, store.Report{Probe: "pi1", Seen: t0.Add(time.Second)})
		require.NoError(t, err)
		assert.Equal(t, store.Duplicate, o)
		r2 := r
		r2.SHA256 = "bbb"
		old, o, err := s.PutRun(ctx, r2, store.Report{})
		require.NoError(t, err)
		assert.Equal(t, store.Conflict, o)
		assert.Equal(t, "aaa", old.SHA256)

		back, err := s.GetRun(ctx, "r1")
		require.NoError(t, err)
		assert.Equal(t, r.StartedAt, back.StartedAt, "nanoseconds survive")
		assert.Equal(t, r.Paths, back.Paths)
		assert.Equal(t, "raw/r1", back.RawPath)
		assert.True(t, back.Parsed)
		_, err = s.GetRun(ctx, "nope")
		assert.ErrorIs(t, err, store.ErrNotFound)

		ps, err := s.ListProbes(ctx)
		require.NoError(t, err)
		require.Len(t, ps, 1)
		assert.Equal(t, int64(1), ps[0].Runs, "a duplicate is not a second run")
		assert.Equal(t, "ok", ps[0].LastStatus)
		assert.Equal(t, int64(0), ps[0].Backlog, "the latest report wins")
		require.NotNil(t, ps[0].LastSeen)
		assert.Equal(t, t0.Add(time.Second), *ps[0].LastSeen)
	})

	t.Run("RawInline", func(t *testing.T) {
		dsn := newDSN(t)
		s := open(t, dsn)
		require.NoError(t, s.AddProbe(ctx, "pi1", "h1", t0))
		body := []byte("{\"type\":\"run\"}\x00\xff binary-safe")
		r := run("r1", "pi1", "aaa", 1)
		r.RawPath, r.Raw = store.RawInline, body
		got, o, err := s.PutRun(ctx, r, store.Report{})
		require.NoError(t, err)
		require.Equal(t, store.Stored, o)
		assert.Nil(t, got.Raw, "the body is not carried back")
		// A duplicate does not store the body twice, a conflict not at all.
		_, o, err = s.PutRun(ctx, r, store.Report{})
		require.NoError(t, err)
		assert.Equal(t, store.Duplicate, o)
		r2 := r
		r2.SHA256, r2.Raw = "bbb", []byte("other")
		_, o, err = s.PutRun(ctx, r2, store.Report{})
		require.NoError(t, err)
		assert.Equal(t, store.Conflict, o)
		require.NoError(t, s.Close())

		s = open(t, dsn) // durable across a reopen
		defer s.Close()
		back, err := s.GetRun(ctx, "r1")
		require.NoError(t, err)
		assert.Equal(t, store.RawInline, back.RawPath)
		b, err := s.GetRaw(ctx, "r1")
		require.NoError(t, err)
		assert.Equal(t, body, b)
		_, err = s.GetRaw(ctx, "nope")
		assert.ErrorIs(t, err, store.ErrNotFound)
		// The deriver's batch read: the bodies there are, no others.
		bs, err := s.(store.DerivedBatcher).GetRaws(ctx, []string{"nope", "r1"})
		require.NoError(t, err)
		assert.Equal(t, map[string][]byte{"r1": body}, bs)
	})

	t.Run("ListUnderived", func(t *testing.T) {
		s := open(t, newDSN(t))
		defer s.Close()
		require.NoError(t, s.AddProbe(ctx, "pi1", "h1", t0))
		for i, id := range []string{"r1", "r2", "r3"} {
			r := run(id, "pi1", "x", i)
			r.Parsed = id != "r2" // a newer schema, stored raw: nothing to derive
			_, _, err := s.PutRun(ctx, r, store.Report{})
			require.NoError(t, err)
		}
		ids := func(after int64) []string {
			rs, err := s.ListUnderived(ctx, after)
			require.NoError(t, err)
			var out []string
			for _, r := range rs {
				out = append(out, r.RunID)
			}
			return out
		}
		assert.Equal(t, []string{"r1", "r3"}, ids(0))
		// Derived, even with no rows (a run without probe records or tests).
		require.NoError(t, s.PutDerived(ctx, "r1", store.Derived{}))
		assert.Equal(t, []string{"r3"}, ids(0))
		r3, err := s.GetRun(ctx, "r3")
		require.NoError(t, err)
		assert.Empty(t, ids(r3.Seq), "paged by seq")
		require.NoError(t, s.PutDerived(ctx, "r3", store.Derived{Cells: []store.SurveyCell{{ProbePath: "a", ResolvePath: "b"}}}))
		require.NoError(t, s.PutDerived(ctx, "r3", store.Derived{}), "re-derived: replaced")
		assert.Empty(t, ids(0))
	})

	t.Run("Sessions", func(t *testing.T) {
		s := open(t, newDSN(t))
		defer s.Close()
		require.NoError(t, s.AddAdmin(ctx, "ops", "tokA", t0))
		require.NoError(t, s.PutSession(ctx, "s1", "tokA", t0.Add(time.Hour)))
		tok, err := s.LookupSession(ctx, "s1", t0)
		require.NoError(t, err)
		assert.Equal(t, store.Token{Hash: "tokA", Name: "ops", Role: store.RoleAdmin}, tok)
		_, err = s.LookupSession(ctx, "s1", t0.Add(time.Hour))
		assert.ErrorIs(t, err, store.ErrNotFound, "expired")
		_, err = s.LookupSession(ctx, "nope", t0)
		assert.ErrorIs(t, err, store.ErrNotFound)
		require.NoError(t, s.DeleteSession(ctx, "s1"))
		_, err = s.LookupSession(ctx, "s1", t0)
		assert.ErrorIs(t, err, store.ErrNotFound, "logged out")
		require.NoError(t, s.PutSession(ctx, "s2", "tokA", t0.Add(time.Hour)))
		require.NoError(t, s.AddProbe(ctx, "ops", "tokP", t0)) // a probe named as the admin
		require.NoError(t, s.RevokeAdmin(ctx, "ops", t0))
		_, err = s.LookupSession(ctx, "s2", t0)
		assert.ErrorIs(t, err, store.ErrNotFound, "the admin revoked: its sessions end")
		_, err = s.LookupToken(ctx, "tokP")
		assert.NoError(t, err, "the probe of the same name is untouched")
		assert.ErrorIs(t, s.RevokeAdmin(ctx, "ops", t0), store.ErrNotFound)
	})

	t.Run("Quarantine", func(t *testing.T) {
		s := open(t, newDSN(t))
		defer s.Close()
		require.NoError(t, s.AddProbe(ctx, "pi1", "h1", t0))
		for i, id := range []string{"r1", "r2", "r3"} {
			_, _, err := s.PutRun(ctx, run(id, "pi1", "x"+id, i), store.Report{})
			require.NoError(t, err)
		}
		require.NoError(t, s.PutDerived(ctx, "r2", store.Derived{Cells: []store.SurveyCell{{ProbePath: "a", ResolvePath: "b"}}}))
		require.NoError(t, s.Quarantine(ctx, "r2", "poison", t0))
		require.NoError(t, s.Quarantine(ctx, "r2", "again", t0), "quarantining twice is no error")
		assert.ErrorIs(t, s.Quarantine(ctx, "nope", "", t0), store.ErrNotFound)
		rs, err := s.ListRuns(ctx, store.RunFilter{})
		require.NoError(t, err)
		var ids []string
		for _, r := range rs {
			ids = append(ids, r.RunID)
		}
		assert.Equal(t, []string{"r1", "r3"}, ids, "hidden from lists")
		un, err := s.ListUnderived(ctx, 0)
		require.NoError(t, err)
		for _, r := range un {
			assert.NotEqual(t, "r2", r.RunID, "never derived")
		}
		var x exportIDs
		require.NoError(t, s.Export(ctx, store.ExportFilter{}, &x))
		assert.Equal(t, []string{"r1", "r3"}, x.runs, "hidden from exports")
		assert.Zero(t, x.cells, "its derived rows too")
		back, err := s.GetRun(ctx, "r2")
		require.NoError(t, err, "the row is kept")
		assert.Equal(t, "xr2", back.SHA256)
	})

	t.Run("ListFiltersAndPages", func(t *testing.T) {
		s := open(t, newDSN(t))
		defer s.Close()
		for i := 0; i < 25; i++ {
			r := run(fmt.Sprintf("r%02d", i), []string{"pi1", "pi2"}[i%2], "x", i)
			if i%5 == 0 {
				r.Command = "run"
			}
			_, _, err := s.PutRun(ctx, r, store.Report{})
			require.NoError(t, err)
		}
		var all []store.Run
		after := int64(0)
		for {
			page, err := s.ListRuns(ctx, store.RunFilter{After: after, Limit: 10})
			require.NoError(t, err)
			if len(page) == 0 {
				break
			}
			all = append(all, page...)
			after = page[len(page)-1].Seq
		}
		require.Len(t, all, 25)
		for i, r := range all {
			assert.Equal(t, fmt.Sprintf("r%02d", i), r.RunID, "pages in upload order, none skipped or repeated")
		}
		got, err := s.ListRuns(ctx, store.RunFilter{Probe: "pi2"})
		require.NoError(t, err)
		assert.Len(t, got, 12)
		got, err = s.ListRuns(ctx, store.RunFilter{Command: "run"})
		require.NoError(t, err)
		assert.Len(t, got, 5)
		got, err = s.ListRuns(ctx, store.RunFilter{Since: t0.Add(10 * time.Minute), Until: t0.Add(20 * time.Minute)})
		require.NoError(t, err)
		assert.Len(t, got, 10, "since inclusive, until exclusive")
		// An upload the server could not parse has no start time: a
		// window holds it by when it was stored.
		un := store.Run{RunID: "unparsed", ProbeID: "pi1", Command: "run", SchemaVersion: "9.0", Status: "unparsed",
			SHA256: "u", RawPath: "raw/unparsed", ContentType: "application/x-ndjson", StoredAt: t0.Add(15 * time.Minute)}
		_, _, err = s.PutRun(ctx, un, store.Report{})
		require.NoError(t, err)
		got, err = s.ListRuns(ctx, store.RunFilter{Since: t0.Add(10 * time.Minute), Until: t0.Add(20 * time.Minute)})
		require.NoError(t, err)
		require.Len(t, got, 11, "the unparsed upload stored inside the window")
		assert.Equal(t, "unparsed", got[10].RunID)
		got, err = s.ListRuns(ctx, store.RunFilter{Since: t0.Add(20 * time.Minute)})
		require.NoError(t, err)
		assert.Len(t, got, 5, "... and not outside it")
	})

	t.Run("Tokens", func(t *testing.T) {
		s := open(t, newDSN(t))
		defer s.Close()
		require.NoError(t, s.AddProbe(ctx, "pi1", "hash1", t0))
		assert.ErrorIs(t, s.AddProbe(ctx, "pi1", "hash2", t0), store.ErrExists)
		require.NoError(t, s.AddAdmin(ctx, "ops", "hashA", t0))
		require.NoError(t, s.AddAdmin(ctx, "pi1", "hashB", t0)) // an admin named as a probe
		tok, err := s.LookupToken(ctx, "hash1")
		require.NoError(t, err)
		assert.Equal(t, store.Token{Hash: "hash1", Name: "pi1", Role: store.RoleProbe}, tok)
		tok, err = s.LookupToken(ctx, "hashA")
		require.NoError(t, err)
		assert.Equal(t, store.RoleAdmin, tok.Role)
		_, err = s.LookupToken(ctx, "hash2")
		assert.ErrorIs(t, err, store.ErrNotFound)
		require.NoError(t, s.Revoke(ctx, "pi1", t0.Add(time.Hour)))
		_, err = s.LookupToken(ctx, "hash1")
		assert.ErrorIs(t, err, store.ErrNotFound, "a revoked token no longer authenticates")
		tok, err = s.LookupToken(ctx, "hashB")
		require.NoError(t, err, "probe and admin names are separate: revoking the probe leaves the admin")
		assert.Equal(t, store.RoleAdmin, tok.Role)
		assert.ErrorIs(t, s.Revoke(ctx, "pi1", t0), store.ErrNotFound)
		ps, err := s.ListProbes(ctx)
		require.NoError(t, err)
		require.Len(t, ps, 1)
		require.NotNil(t, ps[0].RevokedAt)
		require.NoError(t, s.Seen(ctx, store.Report{Probe: "pi1", Seen: t0, Backlog: 7, Dropped: 2}))
		require.NoError(t, s.Seen(ctx, store.Report{Probe: "pi1", Seen: t0, Backlog: 5, Dropped: 1}))
		ps, err = s.ListProbes(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(5), ps[0].Backlog)
		assert.Equal(t, int64(3), ps[0].Dropped, "drops add up")

		// A revoked name is enrolled again with a new token (rotation).
		require.NoError(t, s.AddProbe(ctx, "pi1", "hash3", t0.Add(2*time.Hour)))
		tok, err = s.LookupToken(ctx, "hash3")
		require.NoError(t, err)
		assert.Equal(t, "pi1", tok.Name)
		_, err = s.LookupToken(ctx, "hash1")
		assert.ErrorIs(t, err, store.ErrNotFound, "the old token stays revoked")
		assert.ErrorIs(t, s.AddProbe(ctx, "pi1", "hash4", t0), store.ErrExists, "live again: enrolled once")
		ps, err = s.ListProbes(ctx)
		require.NoError(t, err)
		require.Len(t, ps, 1)
		assert.Nil(t, ps[0].RevokedAt)
		assert.Equal(t, int64(5), ps[0].Backlog, "the probe's history is kept")
	})

	t.Run("ConcurrentExactlyOnce", func(t *testing.T) {
		s := open(t, newDSN(t))
		defer s.Close()
		const ids, writers = 40, 8
		var mu sync.Mutex
		count := map[store.Outcome]int{}
		var wg sync.WaitGroup
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; i < ids; i++ {
					// Writers 0 and 1 disagree on content: exactly one wins per id.
					_, o, err := s.PutRun(ctx, run(fmt.Sprintf("c%02d", i), "pi", fmt.Sprint(w%2), i), store.Report{})
					if !assert.NoError(t, err) {
						return
					}
					mu.Lock()
					count[o]++
					mu.Unlock()
				}
			}(w)
		}
		wg.Wait()
		assert.Equal(t, ids, count[store.Stored])
		assert.Equal(t, ids*writers, count[store.Stored]+count[store.Duplicate]+count[store.Conflict])
		all, err := s.ListRuns(ctx, store.RunFilter{})
		require.NoError(t, err)
		assert.Len(t, all, ids)
	})

	// Two stores on one database (replicas), each with concurrent
	// writers: batches of several probes, inline bodies, paths and
	// retries, committed at once. Every run once, with its body and
	// paths; every probe's count is its runs; no deadlock.
	t.Run("ConcurrentProbesReplicas", func(t *testing.T) {
		dsn := newDSN(t)
		stores := []store.Store{open(t, dsn), open(t, dsn)}
		defer stores[0].Close()
		defer stores[1].Close()
		probes := []string{"pa", "pb", "pc", "pd"}
		for i, p := range probes {
			require.NoError(t, stores[i%2].AddProbe(ctx, p, "h-"+p, t0))
		}
		const ids, writers = 60, 6
		var mu sync.Mutex
		stored := map[string]int{}
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := stores[w%2]
				for k := range ids {
					// Every writer puts every run (retries from either
					// replica, and within one group commit: writers of
					// one replica go in step).
					i := (k + (w%2)*ids/2) % ids
					p := probes[i%len(probes)]
					r := run(fmt.Sprintf("p%02d", i), p, fmt.Sprintf("sha-%d", i), i)
					r.RawPath, r.Raw = store.RawInline, fmt.Appendf(nil, "body %d", i)
					r.Status = fmt.Sprintf("st%d", i)
					_, o, err := s.PutRun(ctx, r, store.Report{Probe: p, Seen: t0.Add(time.Duration(i) * time.Second), Dropped: 1})
					if !assert.NoError(t, err) {
						return
					}
					assert.NotEqual(t, store.Conflict, o, "same content is never a conflict")
					if o == store.Stored {
						mu.Lock()
						stored[r.RunID]++
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		require.Len(t, stored, ids)
		for id, n := range stored {
			assert.Equal(t, 1, n, "%s stored once", id)
		}
		for i := range ids {
			id := fmt.Sprintf("p%02d", i)
			b, err := stores[i%2].GetRaw(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, fmt.Sprintf("body %d", i), string(b))
			r, err := stores[(i+1)%2].GetRun(ctx, id)
			require.NoError(t, err)
			assert.Len(t, r.Paths, 2)
		}
		ps, err := stores[0].ListProbes(ctx)
		require.NoError(t, err)
		require.Len(t, ps, len(probes))
		for _, p := range ps {
			assert.Equal(t, int64(ids/len(probes)), p.Runs, "%s: its runs counted once each", p.Name)
			assert.Equal(t, int64(ids/len(probes)*writers), p.Dropped, "%s: every report's drops add up", p.Name)
			assert.Regexp(t, `^st\d+$`, p.LastStatus)
		}
	})

	t.Run("Derived", func(t *testing.T) {
		s := open(t, newDSN(t))
		defer s.Close()
		_, _, err := s.PutRun(ctx, run("d1", "pi", "x", 1), store.Report{})
		require.NoError(t, err)
		d := store.Derived{
			Cells: []store.SurveyCell{{ProbePath: "wlan0", ResolvePath: "wlan0", Targets: 10, Responsive: 9, Unresponsive: 1, UnresponsivePct: 10, RTTP50ms: 12.5, RTTMeanms: 13.25},
				{ProbePath: "wlan0", ResolvePath: "wwan0", Targets: 8, Responsive: 8, RTTP50ms: 40.125}},
			Probes: []store.SurveyProbe{{ProbePath: "wwan0", ResolvePath: "wlan0", Address: "198.18.9.1", Method: "tcp-syn", Sent: 10, Received: 9, Responsive: true, Valid: true},
				{ProbePath: "wlan0", ResolvePath: "wlan0", Address: "fd00::1", Method: "tcp-syn", Sent: 10}},
			Tests: []store.PatternTest{{Index: 0, Pattern: "bulk", Transport: "mptcp", Path: "wlan0", Status: "success",
				PathBytes: []store.PathBytes{{Path: "wlan0", Sent: 1000, Received: 5000000}, {Path: "wwan0", Sent: 10, Received: 20}}}},
		}
		require.NoError(t, s.PutDerived(ctx, "d1", store.Derived{Cells: d.Cells[:1]}))
		require.NoError(t, s.PutDerived(ctx, "d1", d), "replaces, never appends")
		got, err := s.GetDerived(ctx, "d1")
		require.NoError(t, err)
		assert.Equal(t, d, got)
	})

	t.Run("DerivedManyProbes", func(t *testing.T) {
		// More probe records than one insert takes (PostgreSQL inserts
		// them in chunks): every one stored once, in order.
		s := open(t, newDSN(t))
		defer s.Close()
		_, _, err := s.PutRun(ctx, run("d2", "pi", "x", 1), store.Report{})
		require.NoError(t, err)
		var d store.Derived
		for i := range 2503 {
			d.Probes = append(d.Probes, store.SurveyProbe{ProbePath: "wlan0", ResolvePath: "wwan0", Address: fmt.Sprintf("198.18.%d.%d", i/250, i%250),
				Method: "tcp-syn", Sent: int64(i), Received: int64(i % 7), Responsive: i%3 == 0, Valid: i%5 != 0})
		}
		require.NoError(t, s.PutDerived(ctx, "d2", d))
		got, err := s.GetDerived(ctx, "d2")
		require.NoError(t, err)
		assert.Equal(t, d, got)
	})

	t.Run("Schedules", func(t *testing.T) {
		s := open(t, newDSN(t))
		defer s.Close()
		_, err := s.GetSchedule(ctx, "pi1")
		assert.ErrorIs(t, err, store.ErrNotFound)
		rev, err := s.PutSchedule(ctx, store.AnyProbe, []byte(`{"tasks":[]}`))
		require.NoError(t, err)
		assert.Equal(t, int64(1), rev)
		sc, err := s.GetSchedule(ctx, "pi1")
		require.NoError(t, err)
		assert.Equal(t, store.Schedule{Probe: store.AnyProbe, Revision: 1, Body: []byte(`{"tasks":[]}`)}, sc)
		_, err = s.PutSchedule(ctx, "pi1", []byte(`{"a":1}`))
		assert.ErrorIs(t, err, store.ErrNotFound, "a probe that is not enrolled (a typo) gets no schedule")
		require.NoError(t, s.AddProbe(ctx, "pi1", "h-pi1", time.Unix(1, 0)))
		_, err = s.PutSchedule(ctx, "pi1", []byte(`{"a":1}`))
		require.NoError(t, err)
		rev, err = s.PutSchedule(ctx, "pi1", []byte(`{"a":2}`))
		require.NoError(t, err)
		assert.Equal(t, int64(2), rev, "revisions count per probe")
		sc, err = s.GetSchedule(ctx, "pi1")
		require.NoError(t, err)
		assert.Equal(t, store.Schedule{Probe: "pi1", Revision: 2, Body: []byte(`{"a":2}`)}, sc)

		require.NoError(t, s.PutProbeStatus(ctx, "pi1", []byte(`{"refusals":[1]}`), time.Unix(2, 0)))
		require.NoError(t, s.PutProbeStatus(ctx, "pi1", []byte(`{"refusals":[]}`), time.Unix(3, 0)))
		st, err := s.ProbeStatuses(ctx)
		require.NoError(t, err)
		assert.Equal(t, map[string][]byte{"pi1": []byte(`{"refusals":[]}`)}, st, "the last report replaces the one before")
	})

	t.Run("Reopen", func(t *testing.T) {
		dsn := newDSN(t)
		s := open(t, dsn)
		_, _, err := s.PutRun(ctx, run("keep", "pi", "k", 1), store.Report{})
		require.NoError(t, err)
		require.NoError(t, s.Close())
		s = open(t, dsn) // migrations run again: a no-op
		defer s.Close()
		r, err := s.GetRun(ctx, "keep")
		require.NoError(t, err)
		assert.Equal(t, "k", r.SHA256)
		_, _, err = s.PutRun(ctx, run("after", "pi", "k", 2), store.Report{})
		require.NoError(t, err)
		_, err = s.GetRun(ctx, "after")
		require.False(t, errors.Is(err, store.ErrNotFound))
	})

	t.Run("Identity", func(t *testing.T) {
		// Replicas starting together on one database agree on one pair,
		// kept across reopening.
		dsn := newDSN(t)
		s := open(t, dsn)
		var wg sync.WaitGroup
		got := make([]string, 6)
		for i := range got {
			wg.Go(func() {
				c, k, err := s.Identity(ctx, func() ([]byte, []byte, error) {
					return []byte(fmt.Sprintf("cert %d", i)), []byte(fmt.Sprintf("key %d", i)), nil
				})
				assert.NoError(t, err)
				got[i] = string(c) + "/" + string(k)
			})
		}
		wg.Wait()
		for _, g := range got {
			assert.Equal(t, got[0], g)
		}
		require.NoError(t, s.Close())
		s = open(t, dsn)
		defer s.Close()
		c, k, err := s.Identity(ctx, func() ([]byte, []byte, error) { return nil, nil, errors.New("must not be called") })
		require.NoError(t, err)
		assert.Equal(t, got[0], string(c)+"/"+string(k))
	})

	t.Run("Rollups", func(t *testing.T) { runRollups(t, open(t, newDSN(t))) })
	t.Run("RollupsQuarantine", func(t *testing.T) { runRollupsQuarantine(t, open(t, newDSN(t))) })
	t.Run("RollupsBatched", func(t *testing.T) { runRollupsBatched(t, open(t, newDSN(t))) })
}

// exportIDs is an ExportSink keeping the run ids and counting cells.
type exportIDs struct {
	runs  []string
	cells int
}

func (x *exportIDs) Run(r store.Run) error                              { x.runs = append(x.runs, r.RunID); return nil }
func (x *exportIDs) Cell(store.RunRef, store.SurveyCell) error          { x.cells++; return nil }
func (x *exportIDs) Probe(store.RunRef, int64, store.SurveyProbe) error { return nil }
func (x *exportIDs) Test(store.RunRef, store.PatternTest) error         { return nil }
func (x *exportIDs) PathBytes(store.RunRef, int64, store.PathBytes) error {
	return nil
}
func (x *exportIDs) Mobile(store.RunRef, store.MobileSummary) error { return nil }
