package collect

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/internal/pgtest"
)

// bigStream is the test stream of run id by probe with its records
// repeated n times (past the size kept inline, so it is a raw file).
func bigStream(t *testing.T, id, probe string, n int) []byte {
	b, err := os.ReadFile("../../../report/testdata/stream.jsonl")
	require.NoError(t, err)
	s := strings.ReplaceAll(strings.ReplaceAll(string(b), "0f8c3f6e-3c1a-4c36-9a55-1f2d1c5e7a10", id), "m-0123456789abcdef", probe)
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	var out bytes.Buffer
	out.WriteString(lines[0] + "\n")
	recs := lines[1 : len(lines)-1]
	for range n {
		for _, r := range recs {
			out.WriteString(r + "\n")
		}
	}
	trailer := regexp.MustCompile(`"records":[0-9]+`).ReplaceAllString(lines[len(lines)-1], fmt.Sprintf(`"records":%d`, n*len(recs)))
	out.WriteString(trailer + "\n")
	return out.Bytes()
}

// TestReindexRemovesOrphansPostgres: a raw file no index row names (the
// collector SIGKILLed between the file and the row) is removed by
// `collect reindex`; an indexed file, and an orphan young enough to be an
// upload still in progress, stay.
func TestReindexRemovesOrphansPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	data := t.TempDir()
	st, err := store.Open(ctx, dsn)
	require.NoError(t, err)
	tok := collect.NewToken()
	require.NoError(t, st.AddProbe(ctx, "pi1", collect.HashToken(tok), time.Now()))
	srv, err := collect.New(collect.Config{Store: st, Data: data, Limits: collect.DefaultLimits()})
	require.NoError(t, err)
	ts := httptest.NewServer(srv.Handler())
	id := uuid.NewString()
	body := bigStream(t, id, "pi1", 2000)
	require.Greater(t, len(body), 200<<10)
	req, _ := http.NewRequest(http.MethodPut, ts.URL+"/v1/runs/"+id, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	ts.Close()
	st.Close()
	indexed, err := filepath.Glob(filepath.Join(data, "raw", id[:2], id+".*"))
	require.NoError(t, err)
	require.Len(t, indexed, 1)

	// What a SIGKILL between the rename and the row leaves behind.
	orphan := func(age time.Duration) string {
		oid := uuid.NewString()
		b := bigStream(t, oid, "pi1", 2000)
		sum := sha256.Sum256(b)
		dir := filepath.Join(data, "raw", oid[:2])
		require.NoError(t, os.MkdirAll(dir, 0o750))
		p := filepath.Join(dir, oid+"."+hex.EncodeToString(sum[:]))
		require.NoError(t, os.WriteFile(p, b, 0o640))
		require.NoError(t, os.Chtimes(p, time.Now().Add(-age), time.Now().Add(-age)))
		return p
	}
	old, young := orphan(time.Hour), orphan(0)
	// An orphan under the name of an indexed run (other content).
	stale := filepath.Join(data, "raw", id[:2], id+"."+strings.Repeat("0", 64))
	require.NoError(t, os.WriteFile(stale, []byte("x"), 0o640))
	require.NoError(t, os.Chtimes(stale, time.Now().Add(-time.Hour), time.Now().Add(-time.Hour)))

	out, err := execute(t, "--data", data, "--db", dsn, "reindex")
	require.NoError(t, err, out)
	assert.Contains(t, out, "removed 2 raw files")
	assert.NoFileExists(t, old)
	assert.NoFileExists(t, stale)
	assert.FileExists(t, young, "may be an upload in progress")
	assert.FileExists(t, indexed[0])
}
