package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docVariants are the test document and mutations of it, valid and not.
func docVariants(t testing.TB) [][]byte {
	b, err := os.ReadFile(filepath.Join("testdata", "document.json"))
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(b, &doc))
	out := [][]byte{b}
	mut := func(f func(m map[string]any)) {
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		f(m)
		c, err := json.Marshal(m)
		require.NoError(t, err)
		out = append(out, c)
	}
	mut(func(m map[string]any) { delete(m, "records") })
	mut(func(m map[string]any) { m["records"] = []any{} })
	mut(func(m map[string]any) { m["records"] = "x" })
	mut(func(m map[string]any) { m["status"] = "fine" })
	mut(func(m map[string]any) { m["extra"] = 1 })
	mut(func(m map[string]any) { delete(m, "run_id") })
	mut(func(m map[string]any) { m["records"] = append(m["records"].([]any), map[string]any{"type": "header"}) })
	mut(func(m map[string]any) { m["records"] = append(m["records"].([]any), map[string]any{"type": ""}) })
	mut(func(m map[string]any) { m["records"] = append(m["records"].([]any), 7) })
	mut(func(m map[string]any) {
		m["records"] = append([]any{map[string]any{"no": "type"}}, m["records"].([]any)...)
	})
	out = append(out, []byte(`[]`), []byte(`{`), []byte(`{}`), append(bytes.Clone(b), []byte(` {}`)...), b[:len(b)/2])
	return out
}

// TestCheckDocumentStreamAgrees: the streaming check accepts exactly the
// documents CheckDocument accepts, with the same summary, and points into
// records like it.
func TestCheckDocumentStreamAgrees(t *testing.T) {
	for i, d := range docVariants(t) {
		want, werr := CheckDocument(d)
		got, gerr := CheckDocumentStream(bytes.NewReader(d))
		require.Equal(t, werr == nil, gerr == nil, "variant %d: whole %v, stream %v", i, werr, gerr)
		if werr == nil {
			assert.Equal(t, want, got, "variant %d", i)
			continue
		}
		var inv *InvalidError
		assert.True(t, errors.As(gerr, &inv), "variant %d: %v", i, gerr)
	}
	d := docVariants(t)[10] // a record without a type first
	_, err := CheckDocumentStream(bytes.NewReader(d))
	var inv *InvalidError
	require.ErrorAs(t, err, &inv)
	assert.True(t, strings.HasPrefix(inv.Pointer, "/records/0"), inv.Pointer)
}

func TestCheckDocumentStreamNewerMajor(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "document.json"))
	require.NoError(t, err)
	b = bytes.Replace(b, []byte(`"schema_version": "1.1"`), []byte(`"schema_version": "2.0"`), 1)
	sum, err := CheckDocumentStream(bytes.NewReader(append(b[:len(b)-2:len(b)-2], []byte(`,"new":{}}`)...)))
	require.ErrorIs(t, err, ErrNewerMajor)
	assert.Equal(t, "0f8c3f6e-3c1a-4c36-9a55-1f2d1c5e7a10", sum.RunID)
}

// FuzzCheckDocumentStream: on any input the streaming check agrees with
// CheckDocument (duplicate keys, which it refuses, aside).
func FuzzCheckDocumentStream(f *testing.F) {
	for _, d := range docVariants(f) {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, d []byte) {
		want, werr := CheckDocument(d)
		got, gerr := CheckDocumentStream(bytes.NewReader(d))
		var inv *InvalidError
		if errors.Is(gerr, ErrNewerMajor) || (errors.As(gerr, &inv) && inv.Reason == "duplicate key") {
			return
		}
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("whole %v, stream %v", werr, gerr)
		}
		if werr == nil {
			assert.Equal(t, want, got)
		}
	})
}
