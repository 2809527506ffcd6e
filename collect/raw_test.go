package collect_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/collect/rawstore"
	"github.com/mptester/mptester/internal/s3test"
)

func objects(t *testing.T, b rawstore.Backend) []string {
	var keys []string
	require.NoError(t, b.List(context.Background(), func(i rawstore.Info) error { keys = append(keys, i.Key); return nil }))
	return keys
}

// testRawBackend: with every upload an object of b, a receipt names a
// stored object; GET streams it back byte-identical; a retry writes
// nothing; a conflict leaves no object behind; GC removes an object no
// index row names once it is old enough, and nothing else.
func testRawBackend(t *testing.T, b rawstore.Backend) {
	ctx := context.Background()
	e := newEnvWith(t, func(c *collect.Config) { c.Raw, c.InlineMax = b, -1 })
	id := uuid.NewString()
	body := stream(t, id, "pi1")
	a := e.put(t, id, body, e.probeTok, "")
	require.Equal(t, http.StatusCreated, a.code, "%s", a.body)
	run, err := e.st.GetRun(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, rawstore.Key(id, sha(body)), run.RawPath)
	assert.Equal(t, []string{run.RawPath}, objects(t, b))
	g := e.get(t, "/v1/runs/"+id, e.adminTok)
	require.Equal(t, http.StatusOK, g.code)
	assert.Equal(t, body, g.body, "byte-identical from the raw store")
	assert.Equal(t, http.StatusOK, e.put(t, id, body, e.probeTok, "").code, "a retry is a duplicate")
	other := []byte(strings.Replace(string(body), `"ok"`, `"partial"`, 1))
	require.NotEqual(t, body, other)
	assert.Equal(t, http.StatusConflict, e.put(t, id, other, e.probeTok, "").code)
	assert.Equal(t, []string{run.RawPath}, objects(t, b), "the conflicting upload's object is removed")
	rep := e.get(t, "/v1/report?format=json&probe=pi1&since=2026-11-22&until=2026-11-23", e.adminTok)
	assert.Equal(t, http.StatusOK, rep.code, "the report reads raw uploads from the raw store: %s", rep.body)
	assert.Contains(t, string(rep.body), id, "the per-run report lists the run")
	fp := e.page(t, "/?since=2026-11-22&until=2026-11-23")
	assert.Equal(t, http.StatusOK, fp.code, "the fleet page (roll-ups only): %s", fp.body)
	h := e.get(t, "/healthz", "")
	assert.Equal(t, http.StatusOK, h.code, "%s", h.body)

	// An object stored by a collector that crashed before its index row.
	orphan := uuid.NewString()
	o, err := b.Create(ctx, orphan)
	require.NoError(t, err)
	ob := stream(t, orphan, "pi1")
	_, err = o.Write(ob)
	require.NoError(t, err)
	okey, err := o.Commit(ctx, sha(ob))
	require.NoError(t, err)
	res, err := e.srv.GC(ctx, time.Hour, false)
	require.NoError(t, err)
	assert.Equal(t, collect.GCResult{Objects: 2, Indexed: 1, Orphans: 1, Young: 1}, res, "young orphans (uploads in flight) are spared")
	res, err = e.srv.GC(ctx, 0, false)
	require.NoError(t, err)
	assert.Equal(t, collect.GCResult{Objects: 2, Indexed: 1, Orphans: 1, Removed: 1}, res)
	assert.Equal(t, []string{run.RawPath}, objects(t, b))
	_, err = b.Open(ctx, okey)
	assert.ErrorIs(t, err, rawstore.ErrNotFound)
	g = e.get(t, "/v1/runs/"+id, e.adminTok)
	assert.Equal(t, body, g.body, "the indexed upload is kept")
}

func TestRawBackendDir(t *testing.T) {
	d, err := rawstore.NewDir(t.TempDir())
	require.NoError(t, err)
	testRawBackend(t, d)
}

func TestRawBackendS3(t *testing.T) {
	srv := s3test.Start(t, "")
	srv.Bucket(t, "fleet", "", "")
	b, err := rawstore.NewS3(rawstore.S3Config{Bucket: "fleet", Prefix: "collect", Endpoint: srv.Endpoint, Region: "us-east-1",
		PathStyle: true, Spool: t.TempDir()})
	require.NoError(t, err)
	testRawBackend(t, b)
}
