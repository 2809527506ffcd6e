package upload

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sent records the run ids of the uploads a collector received, in order.
type sent struct {
	mu  sync.Mutex
	ids []string
}

func (s *sent) wrap(fail func(id string) int) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
			s.mu.Lock()
			s.ids = append(s.ids, id)
			s.mu.Unlock()
			if code := fail(id); code != 0 {
				io.Copy(io.Discard, r.Body)
				w.WriteHeader(code)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
}

// TestRefusedResultBlocksNothing: a result the collector refuses (400)
// while rejected/ cannot be written (here: not a directory, as a full
// disk would fail it) is set aside for this process, not retried, and
// the valid results behind it are uploaded.
func TestRefusedResultBlocksNothing(t *testing.T) {
	var s sent
	sv := newServer(t, s.wrap(func(string) int { return 0 }))
	dir := t.TempDir()
	sp, err := OpenSpool(dir, Quota{})
	require.NoError(t, err)
	bad := uuid.NewString()
	spoolResult(t, sp, result(t, bad, "pi1")[:200], bad) // truncated: 400
	oldest(t, dir, bad)
	var good []string
	for range 4 {
		id := uuid.NewString()
		spoolResult(t, sp, result(t, id, "pi1"), id)
		good = append(good, id)
	}
	require.NoError(t, os.RemoveAll(filepath.Join(dir, dirRejected)))
	require.NoError(t, os.WriteFile(filepath.Join(dir, dirRejected), nil, 0o600))

	sl := &sleeps{}
	res, err := client(sv, sl, CompressZstd).Drain(context.Background(), sp)
	require.NoError(t, err)
	assert.Equal(t, Result{Uploaded: 4, Rejected: 1}, res)
	assert.Empty(t, sl.d, "a 4xx is never retried")
	for _, id := range good {
		assert.NotNil(t, sv.raw(t, id), "uploaded")
	}
	res, err = client(sv, sl, CompressZstd).Drain(context.Background(), sp)
	require.NoError(t, err)
	assert.Equal(t, Result{}, res)
	require.Len(t, s.ids, 5, "the refused result is sent once")
	assert.Equal(t, bad, s.ids[0])
	assert.ElementsMatch(t, good, s.ids[1:])
}

// TestFailingResultRetriedAfterOthers: a result the collector keeps
// failing to store (500) is retried with backoff after the others, which
// are uploaded on the first pass.
func TestFailingResultRetriedAfterOthers(t *testing.T) {
	var s sent
	bad := uuid.NewString()
	sv := newServer(t, s.wrap(func(id string) int {
		if id == bad {
			return http.StatusInternalServerError
		}
		return 0
	}))
	dir := t.TempDir()
	sp, err := OpenSpool(dir, Quota{})
	require.NoError(t, err)
	spoolResult(t, sp, result(t, bad, "pi1"), bad)
	oldest(t, dir, bad)
	var good []string
	for range 3 {
		id := uuid.NewString()
		spoolResult(t, sp, result(t, id, "pi1"), id)
		good = append(good, id)
	}
	sl := &sleeps{}
	res, err := client(sv, sl, CompressZstd).Drain(context.Background(), sp)
	require.ErrorIs(t, err, ErrNotDrained)
	assert.Equal(t, 3, res.Uploaded)
	assert.Equal(t, 1, res.Pending)
	require.Len(t, s.ids, 7)
	assert.Equal(t, bad, s.ids[0])
	assert.ElementsMatch(t, good, s.ids[1:4], "the others first")
	assert.Equal(t, []string{bad, bad, bad}, s.ids[4:], "then the retries")
	assert.Len(t, sl.d, 3)
}

// TestStaleTmpRemovedAndCounted: OpenSpool removes what a killed process
// left in tmp/ (unwritten for StaleTmp) and keeps a result being written;
// Tmp says both.
func TestStaleTmpRemovedAndCounted(t *testing.T) {
	dir := t.TempDir()
	_, err := OpenSpool(dir, Quota{})
	require.NoError(t, err)
	old, fresh := filepath.Join(dir, dirTmp, "a.jsonl"), filepath.Join(dir, dirTmp, "b.jsonl")
	require.NoError(t, os.WriteFile(old, []byte("{"), 0o600))
	require.NoError(t, os.WriteFile(fresh, []byte("{"), 0o600))
	past := time.Now().Add(-StaleTmp - time.Minute)
	require.NoError(t, os.Chtimes(old, past, past))
	sp, err := OpenSpool(dir, Quota{})
	require.NoError(t, err)
	now, removed, err := sp.Tmp()
	require.NoError(t, err)
	assert.Equal(t, 1, removed)
	require.Len(t, now, 1)
	assert.Equal(t, "b.jsonl", now[0].Name)
	assert.NoFileExists(t, old)
}

// oldest makes a pending result the first in line.
func oldest(t *testing.T, dir, id string) {
	past := time.Now().Add(-time.Minute)
	require.NoError(t, os.Chtimes(filepath.Join(dir, dirNew, id+".jsonl"), past, past))
}
