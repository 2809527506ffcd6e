package collect_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/collect/store"
)

// downDerive is a store whose derived-table writes fail while down is
// set: the index database gone for a while.
type downDerive struct {
	store.Store
	down atomic.Bool
}

func (d *downDerive) PutDerivedStream(ctx context.Context, runID string, fill func(store.DerivedSink) error) error {
	if d.down.Load() {
		return errors.New("connection refused")
	}
	return d.Store.PutDerivedStream(ctx, runID, fill)
}

// TestDerivedTablesHeal: runs stored while the derived tables cannot be
// written get their rows once the store is back, without a restart; the
// backlog shows on /healthz and /metrics meanwhile.
func TestDerivedTablesHeal(t *testing.T) {
	dd := &downDerive{}
	dd.down.Store(true)
	e := newEnvWith(t, func(c *collect.Config) { dd.Store = c.Store; c.Store = dd; c.DeriveRetry = 20 * time.Millisecond })
	underived := uploadThree(t, e, dd.Store)
	health := func() string { return string(e.get(t, "/healthz", "").body) }
	require.Eventually(t, func() bool { return underived() == 3 && strings.Contains(health(), `"derive_backlog":"3"`) },
		30*time.Second, 10*time.Millisecond, "the backlog is shown")
	m := e.get(t, "/metrics", e.adminTok)
	assert.Contains(t, string(m.body), "mptester_collect_derive_backlog 3")
	dd.down.Store(false)
	require.Eventually(t, func() bool { return underived() == 0 }, 30*time.Second, 10*time.Millisecond, "healed without a restart")
	require.Eventually(t, func() bool { return strings.Contains(health(), `"derive_backlog":"0"`) }, 30*time.Second, 10*time.Millisecond)
}

// uploadThree uploads three runs and returns how many runs st lists as
// underived, for each call.
func uploadThree(t *testing.T, e *env, st store.Store) func() int {
	for range 3 {
		id := uuid.NewString()
		require.Equal(t, http.StatusCreated, e.put(t, id, stream(t, id, "pi1"), e.probeTok, "").code)
	}
	return func() int {
		rs, err := st.ListUnderived(context.Background(), 0)
		require.NoError(t, err)
		return len(rs)
	}
}

// downIndex is downDerive whose index does not answer either while
// down: what the deriver's store check sees of an outage.
type downIndex struct {
	downDerive
	refused atomic.Int64 // GetRun calls answered down
}

func (d *downIndex) GetRun(ctx context.Context, id string) (store.Run, error) {
	if d.down.Load() {
		d.refused.Add(1)
		return store.Run{}, errDown
	}
	return d.Store.GetRun(ctx, id)
}

// TestDerivedTablesHealWhenStoresReturn: a long outage has grown the
// deriver's backoff (here an hour from the first failure on); the runs
// are derived as soon as the stores are back, not when the backoff ends.
func TestDerivedTablesHealWhenStoresReturn(t *testing.T) {
	dd := &downIndex{}
	dd.down.Store(true)
	e := newEnvWith(t, func(c *collect.Config) {
		dd.Store = c.Store
		c.Store = dd
		c.DeriveRetry, c.StoreCheck = time.Hour, 10*time.Millisecond
	})
	underived := uploadThree(t, e, dd.Store)
	require.Eventually(t, func() bool {
		return underived() == 3 && strings.Contains(string(e.get(t, "/healthz", "").body), `"derive_backlog":"3"`)
	}, 30*time.Second, 10*time.Millisecond, "derivations failed")
	dd.refused.Store(0) // /healthz's checks: only the deriver's from here on
	require.Eventually(t, func() bool { return dd.refused.Load() > 0 }, 30*time.Second, 10*time.Millisecond, "the deriver saw the outage")
	dd.down.Store(false)
	require.Eventually(t, func() bool { return underived() == 0 }, 30*time.Second, 10*time.Millisecond, "healed once the stores are back")
}

// downStore is a store that is unreachable while down is set.
type downStore struct {
	store.Store
	down atomic.Bool
}

var errDown = errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")

func (d *downStore) PutRun(ctx context.Context, r store.Run, rep store.Report) (store.Run, store.Outcome, error) {
	if d.down.Load() {
		return store.Run{}, 0, errDown
	}
	return d.Store.PutRun(ctx, r, rep)
}

func (d *downStore) LookupToken(ctx context.Context, hash string) (store.Token, error) {
	if d.down.Load() {
		return store.Token{}, errDown
	}
	return d.Store.LookupToken(ctx, hash)
}

// TestStoreDownAnswers503: while the store is down an upload is answered
// 503 with Retry-After (the probe backs off), and an admin endpoint says
// the store is unavailable, not that the token is wrong.
func TestStoreDownAnswers503(t *testing.T) {
	ds := &downStore{}
	e := newEnvWith(t, func(c *collect.Config) { ds.Store = c.Store; c.Store = ds })
	ds.down.Store(true)
	id := uuid.NewString()
	a := e.put(t, id, stream(t, id, "pi1"), e.probeTok, "")
	assert.Equal(t, http.StatusServiceUnavailable, a.code, "%s", a.body)
	assert.NotEmpty(t, a.hdr.Get("Retry-After"))
	g := e.get(t, "/v1/runs", e.adminTok)
	assert.Equal(t, http.StatusServiceUnavailable, g.code)
	assert.Contains(t, string(g.body), "store is unavailable")
	assert.NotEmpty(t, g.hdr.Get("Retry-After"))
	ds.down.Store(false)
	a = e.put(t, id, stream(t, id, "pi1"), e.probeTok, "")
	assert.Equal(t, http.StatusCreated, a.code, "%s", a.body)
	// The token is known now (cached): the store failing at PutRun.
	ds.down.Store(true)
	id = uuid.NewString()
	a = e.put(t, id, stream(t, id, "pi1"), e.probeTok, "")
	assert.Equal(t, http.StatusServiceUnavailable, a.code, "%s", a.body)
	assert.NotEmpty(t, a.hdr.Get("Retry-After"))
}

// TestFleetPageSaysStoreUnavailable: with the store down, a signed-in
// browser is told so (503), not shown the sign-in page.
func TestFleetPageSaysStoreUnavailable(t *testing.T) {
	ds := &downStore{}
	e := newEnvWith(t, func(c *collect.Config) { ds.Store = c.Store; c.Store = ds })
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(e.url+"/login", url.Values{"token": {e.adminTok}})
	require.NoError(t, err)
	resp.Body.Close()
	ds.down.Store(true)
	req, err := http.NewRequest(http.MethodGet, e.url+"/", nil)
	require.NoError(t, err)
	for _, ck := range resp.Cookies() {
		req.AddCookie(ck)
	}
	a := do(t, req)
	assert.Equal(t, http.StatusServiceUnavailable, a.code)
	assert.Contains(t, string(a.body), "store is unavailable")
	assert.NotEmpty(t, a.hdr.Get("Retry-After"))
}

func (d *downStore) LookupSession(ctx context.Context, hash string, now time.Time) (store.Token, error) {
	if d.down.Load() {
		return store.Token{}, errDown
	}
	return d.Store.LookupSession(ctx, hash, now)
}

// batchStore derives in batches (store.DerivedBatcher) through the real
// store, holding the first derivation until release is closed (so the
// uploads queue up behind it), and fails every derivation of the run bad.
type batchStore struct {
	store.Store
	release chan struct{}
	bad     atomic.Value // run id
	batches atomic.Int64 // batches of more than one run
}

func (b *batchStore) fill(runID string, fill func(store.DerivedSink) error) func(store.DerivedSink) error {
	if id, _ := b.bad.Load().(string); id == runID {
		return func(store.DerivedSink) error { return errors.New("planted: cannot be derived") }
	}
	return fill
}

func (b *batchStore) PutDerivedStream(ctx context.Context, runID string, fill func(store.DerivedSink) error) error {
	<-b.release
	return b.Store.PutDerivedStream(ctx, runID, b.fill(runID, fill))
}

func (b *batchStore) PutDerivedRuns(ctx context.Context, runs []store.DerivedRun) error {
	<-b.release
	if len(runs) > 1 {
		b.batches.Add(1)
	}
	for i := range runs {
		runs[i].Fill = b.fill(runs[i].RunID, runs[i].Fill)
	}
	return b.Store.(store.DerivedBatcher).PutDerivedRuns(ctx, runs)
}

func (b *batchStore) GetRaws(ctx context.Context, runIDs []string) (map[string][]byte, error) {
	return b.Store.(store.DerivedBatcher).GetRaws(ctx, runIDs)
}

// TestDeriveBatchFailsAlone: the deriver takes what is queued in one
// transaction; a run that cannot be derived fails alone, the others of
// its batch get their rows at once (not after a retry's backoff).
func TestDeriveBatchFailsAlone(t *testing.T) {
	bs := &batchStore{release: make(chan struct{})}
	e := newEnvWith(t, func(c *collect.Config) { bs.Store = c.Store; c.Store = bs; c.DeriveRetry = time.Hour })
	var ids []string
	for i := range 6 {
		id := uuid.NewString()
		if i == 3 {
			bs.bad.Store(id)
		}
		require.Equal(t, http.StatusCreated, e.put(t, id, stream(t, id, "pi1"), e.probeTok, "").code)
		ids = append(ids, id)
	}
	close(bs.release)
	underived := func() []string {
		rs, err := bs.Store.ListUnderived(context.Background(), 0)
		require.NoError(t, err)
		var out []string
		for _, r := range rs {
			out = append(out, r.RunID)
		}
		return out
	}
	require.Eventually(t, func() bool { u := underived(); return len(u) == 1 && u[0] == ids[3] }, 30*time.Second, 10*time.Millisecond,
		"every run but the bad one derived")
	assert.Positive(t, bs.batches.Load(), "the queued runs were derived in a batch")
	// The backlog follows once the deriver has the batch's results.
	require.Eventually(t, func() bool { return strings.Contains(string(e.get(t, "/healthz", "").body), `"derive_backlog":"1"`) },
		30*time.Second, 10*time.Millisecond, "the bad run alone in the backlog")
}

// TestDeriveBatchReadsObjects: runs kept as objects of the raw store (not
// inline) derived in one batch, their bodies read ahead a few at once:
// each run gets its own rows.
func TestDeriveBatchReadsObjects(t *testing.T) {
	bs := &batchStore{release: make(chan struct{})}
	e := newEnvWith(t, func(c *collect.Config) {
		bs.Store = c.Store
		c.Store = bs
		c.DeriveRetry = time.Hour
		c.InlineMax = -1 // every upload an object
	})
	header, _, _ := strings.Cut(string(stream(t, "x", "pi1")), "\n")
	var ids []string
	for i := range 12 {
		id := uuid.NewString()
		var b strings.Builder
		b.WriteString(strings.ReplaceAll(header, `"run_id":"x"`, `"run_id":"`+id+`"`) + "\n")
		for k := range i + 1 {
			fmt.Fprintf(&b, `{"type":"probe","probe_path":"wlan0","resolve_path":"wwan0","resolve_paths":["wwan0"],"address":"198.18.%d.%d","port":443,"domains":["d.example"],"method":"tcp-syn","sent":10,"received":%d,"rtts_ms":[12.5],"rtt_ms":12.5,"answer":"syn-ack","answer_counts":{"syn-ack":1},"responsive":true,"bytes":1200,"valid":true}`+"\n", i, k, i)
		}
		fmt.Fprintf(&b, `{"type":"trailer","run_id":"%s","status":"ok","records":%d,"finished_at":"2026-11-22T10:00:03.000000123Z"}`+"\n", id, i+1)
		require.Equal(t, http.StatusCreated, e.put(t, id, []byte(b.String()), e.probeTok, "").code)
		ids = append(ids, id)
	}
	close(bs.release)
	require.Eventually(t, func() bool {
		rs, err := bs.Store.ListUnderived(context.Background(), 0)
		require.NoError(t, err)
		return len(rs) == 0
	}, 30*time.Second, 10*time.Millisecond, "every run derived")
	assert.Positive(t, bs.batches.Load(), "the queued runs were derived in a batch")
	for i, id := range ids {
		d, err := bs.Store.GetDerived(context.Background(), id)
		require.NoError(t, err)
		require.Len(t, d.Probes, i+1, "run %d's own records", i)
		for k, p := range d.Probes {
			assert.Equal(t, fmt.Sprintf("198.18.%d.%d", i, k), p.Address)
			assert.Equal(t, int64(i), p.Received)
		}
	}
}
