// Package rawstoretest is the one test suite every raw store backend
// passes.
package rawstoretest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect/rawstore"
)

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func put(t *testing.T, b rawstore.Backend, id string, body []byte) (string, error) {
	t.Helper()
	ctx := context.Background()
	o, err := b.Create(ctx, id)
	require.NoError(t, err)
	// written in pieces, as an upload streams in
	for off := 0; off < len(body); off += 7919 {
		_, err := o.Write(body[off:min(off+7919, len(body))])
		require.NoError(t, err)
	}
	back := make([]byte, len(body))
	_, err = o.ReadAt(back, 0)
	if len(body) > 0 {
		require.NoError(t, err)
	}
	require.Equal(t, body, back, "ReadAt reads back what was written")
	return o.Commit(ctx, sum(body))
}

func read(t *testing.T, b rawstore.Backend, key string) []byte {
	t.Helper()
	r, err := b.Open(context.Background(), key)
	require.NoError(t, err)
	defer r.Close()
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	return got
}

func list(t *testing.T, b rawstore.Backend) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	require.NoError(t, b.List(context.Background(), func(i rawstore.Info) error {
		out[i.Key] = i.Size
		return nil
	}))
	return out
}

// Run runs the suite; newBackend returns an empty store each call.
func Run(t *testing.T, newBackend func(t *testing.T) rawstore.Backend) {
	ctx := context.Background()

	t.Run("RoundTrip", func(t *testing.T) {
		b := newBackend(t)
		require.NoError(t, b.Check(ctx))
		id := uuid.NewString()
		body := make([]byte, 3<<20+17)
		_, _ = rand.Read(body)
		key, err := put(t, b, id, body)
		require.NoError(t, err)
		assert.Equal(t, rawstore.Key(id, sum(body)), key)
		gid, gsha, ok := rawstore.ParseKey(key)
		assert.True(t, ok)
		assert.Equal(t, id, gid)
		assert.Equal(t, sum(body), gsha)
		assert.Equal(t, body, read(t, b, key), "byte-identical")
		assert.Equal(t, map[string]int64{key: int64(len(body))}, list(t, b))
	})

	t.Run("SameContentTwice", func(t *testing.T) {
		b := newBackend(t)
		id, body := uuid.NewString(), []byte("one run, sent twice\n")
		k1, err := put(t, b, id, body)
		require.NoError(t, err)
		k2, err := put(t, b, id, body)
		require.NoError(t, err, "a retry of stored content is not an error")
		assert.Equal(t, k1, k2)
		assert.Equal(t, body, read(t, b, k1))
		assert.Len(t, list(t, b), 1)
	})

	t.Run("ConcurrentSameContent", func(t *testing.T) {
		b := newBackend(t)
		id, body := uuid.NewString(), bytes.Repeat([]byte("replicas race\n"), 1000)
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() { _, errs[i] = put(t, b, id, body) })
		}
		wg.Wait()
		for _, err := range errs {
			assert.NoError(t, err)
		}
		assert.Equal(t, map[string]int64{rawstore.Key(id, sum(body)): int64(len(body))}, list(t, b))
	})

	t.Run("OtherContentOtherKey", func(t *testing.T) {
		b := newBackend(t)
		id := uuid.NewString()
		k1, err := put(t, b, id, []byte("first\n"))
		require.NoError(t, err)
		k2, err := put(t, b, id, []byte("second, other content\n"))
		require.NoError(t, err)
		assert.NotEqual(t, k1, k2)
		assert.Equal(t, []byte("first\n"), read(t, b, k1))
		assert.Equal(t, []byte("second, other content\n"), read(t, b, k2))
	})

	t.Run("NeverOverwritten", func(t *testing.T) {
		// Plant other bytes under a key (as no collector would): a
		// commit to that key must fail and leave them.
		b := newBackend(t)
		id := uuid.NewString()
		body := []byte("the real content\n")
		planted := []byte("something else entirely, longer\n")
		o, err := b.Create(ctx, id)
		require.NoError(t, err)
		_, err = o.Write(planted)
		require.NoError(t, err)
		key, err := o.Commit(ctx, sum(body)) // under body's key
		require.NoError(t, err)
		_, err = put(t, b, id, body)
		assert.Error(t, err, "a different object under the key is an error, not overwritten")
		assert.Equal(t, planted, read(t, b, key))
	})

	t.Run("AbortLeavesNothing", func(t *testing.T) {
		b := newBackend(t)
		o, err := b.Create(ctx, uuid.NewString())
		require.NoError(t, err)
		_, err = o.Write([]byte("cut off\n"))
		require.NoError(t, err)
		o.Abort()
		assert.Empty(t, list(t, b))
	})

	t.Run("MissingAndRemove", func(t *testing.T) {
		b := newBackend(t)
		id := uuid.NewString()
		_, err := b.Open(ctx, rawstore.Key(id, sum(nil)))
		assert.True(t, errors.Is(err, rawstore.ErrNotFound), "%v", err)
		key, err := put(t, b, id, []byte("to be removed\n"))
		require.NoError(t, err)
		require.NoError(t, b.Remove(ctx, key))
		_, err = b.Open(ctx, key)
		assert.True(t, errors.Is(err, rawstore.ErrNotFound), "%v", err)
		assert.NoError(t, b.Remove(ctx, key), "removing twice")
		assert.Empty(t, list(t, b))
	})
}
