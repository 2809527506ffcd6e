package collect_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/collect/store"
)

// FuzzIngest sends arbitrary bodies (plain, gzip, zstd, or mislabelled)
// through the real handler and store: the answer is never a 5xx or a
// panic, and whatever is acknowledged reads back byte-identical.
func FuzzIngest(f *testing.F) {
	const id = fixtureRunID
	s := string(stream(f, id, "pi1"))
	doc := string(fixture(f, "document.json", id, "pi1", 0))
	for _, seed := range []string{s, doc, "", "\n", "{}", `{"type":"header"}`, s[:len(s)/2],
		strings.Replace(s, `"1.0"`, `"7.3"`, 1), strings.Replace(doc, `"1.0"`, `"2.0"`, 1),
		strings.ReplaceAll(s, "\n", "\r\n"), s + "\n\n", strings.Replace(s, "pi1", "pi2", 1), "[1,2,3]", "null"} {
		for mode := uint8(0); mode < 5; mode++ {
			f.Add([]byte(seed), mode)
		}
	}
	ctx := context.Background()
	dir := f.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "collect.db"))
	require.NoError(f, err)
	f.Cleanup(func() { st.Close() })
	tok := collect.NewToken()
	admin := collect.NewToken()
	require.NoError(f, st.AddProbe(ctx, "pi1", collect.HashToken(tok), time.Now()))
	require.NoError(f, st.AddAdmin(ctx, "ops", collect.HashToken(admin), time.Now()))
	lim := collect.DefaultLimits()
	lim.MaxBytes, lim.MaxDocument = 1<<20, 1<<20
	srv, err := collect.New(collect.Config{Store: st, Data: filepath.Join(dir, "data"), Limits: lim})
	require.NoError(f, err)
	h := srv.Handler()

	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		body, enc := data, ""
		switch mode % 5 {
		case 1:
			body, enc = gz(data), "gzip"
		case 2:
			body, enc = zs(data), "zstd"
		case 3:
			enc = "gzip"
		case 4:
			enc = "zstd"
		}
		req := httptest.NewRequest(http.MethodPut, "/v1/runs/"+id, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Encoding", enc)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case 200, 201, 202:
		case 400, 403, 409, 413, 415:
			return
		default:
			t.Fatalf("answer %d for %q (%s): %s", rec.Code, data, enc, rec.Body)
		}
		if mode%5 > 2 {
			return // a mislabelled body that happened to decode: the decoded bytes are what counts
		}
		get := httptest.NewRequest(http.MethodGet, "/v1/runs/"+id, nil)
		get.Header.Set("Authorization", "Bearer "+admin)
		out := httptest.NewRecorder()
		h.ServeHTTP(out, get)
		require.Equal(t, http.StatusOK, out.Code)
		if rec.Code == 201 || rec.Code == 202 {
			require.Equal(t, data, out.Body.Bytes(), "acknowledged bytes read back identical")
		}
	})
}
