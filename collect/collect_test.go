package collect_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/collect/store"
)

const (
	fixtureRunID = "0f8c3f6e-3c1a-4c36-9a55-1f2d1c5e7a10"
	fixtureProbe = "m-0123456789abcdef"
)

// fixture is report/testdata's golden stream or document for run id by
// probe; variant changes a measured value (same id, other content).
func fixture(t testing.TB, file, id, probe string, variant int) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "report", "testdata", file))
	require.NoError(t, err)
	s := strings.ReplaceAll(string(b), fixtureRunID, id)
	s = strings.ReplaceAll(s, fixtureProbe, probe)
	if variant != 0 {
		s = strings.Replace(s, "12.5", fmt.Sprintf("%d.5", 12+variant), 1)
	}
	return []byte(s)
}

func stream(t testing.TB, id, probe string) []byte { return fixture(t, "stream.jsonl", id, probe, 0) }

// env is a collect server on loopback with a SQLite store, one enrolled
// probe ("pi1") and one admin.
type env struct {
	url      string
	srv      *collect.Server
	st       store.Store
	data     string
	probeTok string
	adminTok string
	cancel   context.CancelFunc
	done     chan error
}

func newEnv(t testing.TB, mod func(*collect.Limits)) *env {
	t.Helper()
	return newEnvIn(t, t.TempDir(), mod)
}

// newEnvIn is newEnv with its store and data in dir.
func newEnvIn(t testing.TB, dir string, mod func(*collect.Limits)) *env {
	return newEnvWithIn(t, dir, func(c *collect.Config) {
		if mod != nil {
			mod(&c.Limits)
		}
	})
}

// newEnvWith is newEnv with any of the server's Config changed.
func newEnvWith(t testing.TB, mod func(*collect.Config)) *env {
	return newEnvWithIn(t, t.TempDir(), mod)
}

func newEnvWithIn(t testing.TB, dir string, mod func(*collect.Config)) *env {
	return newEnvDSN(t, filepath.Join(dir, "collect.db"), filepath.Join(dir, "data"), mod)
}

// newEnvDSN is newEnvWith on the store dsn names (PostgreSQL too), its
// raw uploads in data.
func newEnvDSN(t testing.TB, dsn, data string, mod func(*collect.Config)) *env {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, dsn)
	require.NoError(t, err)
	e := &env{st: st, data: data, probeTok: collect.NewToken(), adminTok: collect.NewToken()}
	require.NoError(t, st.AddProbe(ctx, "pi1", collect.HashToken(e.probeTok), time.Now()))
	require.NoError(t, st.AddAdmin(ctx, "ops", collect.HashToken(e.adminTok), time.Now()))
	cfg := collect.Config{Store: st, Data: e.data, Limits: collect.DefaultLimits()}
	mod(&cfg)
	e.srv, err = collect.New(cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	e.url = "http://" + ln.Addr().String()
	sctx, cancel := context.WithCancel(ctx)
	e.cancel, e.done = cancel, make(chan error, 1)
	go func() { e.done <- e.srv.Serve(sctx, ln, nil, time.Second) }()
	t.Cleanup(func() {
		cancel()
		<-e.done
		st.Close()
	})
	return e
}

type answer struct {
	code int
	hdr  http.Header
	body []byte
}

func (a answer) receipt(t testing.TB) collect.Receipt {
	var r collect.Receipt
	require.NoError(t, json.Unmarshal(a.body, &r), "%s", a.body)
	return r
}

func (e *env) put(t testing.TB, id string, body []byte, tok, enc string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, e.url+"/v1/runs/"+id, bytes.NewReader(body))
	require.NoError(t, err)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if enc != "" {
		req.Header.Set("Content-Encoding", enc)
	}
	return do(t, req)
}

func (e *env) get(t testing.TB, path, tok string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.url+path, nil)
	require.NoError(t, err)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return do(t, req)
}

func do(t testing.TB, req *http.Request) answer {
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{code: resp.StatusCode, hdr: resp.Header, body: b}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

var zstdEnc, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))

func zs(b []byte) []byte { return zstdEnc.EncodeAll(b, nil) }

// bigStream is the stream fixture with extra DNS records, past inlineMax
// (128 kB) so the server keeps it as a file.
func bigStream(t testing.TB, id, probe string, extra int) []byte {
	s := string(stream(t, id, probe))
	line := `{"type":"dns","path":"wlan0","name":"a.example","rcode":"NOERROR","ms":12.5}` + "\n"
	s = strings.Replace(s, line, strings.Repeat(line, extra+1), 1)
	return []byte(strings.Replace(s, `"records":2`, fmt.Sprintf(`"records":%d`, extra+2), 1))
}

// TestCreatedDuplicateConflict for an upload kept in the database and for
// one kept as a file.
func TestCreatedDuplicateConflict(t *testing.T) {
	for _, c := range []struct {
		name  string
		extra int
		files int
	}{{"inline", 0, 0}, {"file", 3000, 1}} {
		t.Run(c.name, func(t *testing.T) { testCreatedDuplicateConflict(t, c.extra, c.files) })
	}
}

func testCreatedDuplicateConflict(t *testing.T, extra, files int) {
	e := newEnv(t, nil)
	id := uuid.NewString()
	body := bigStream(t, id, "pi1", extra)
	a := e.put(t, id, body, e.probeTok, "")
	require.Equal(t, http.StatusCreated, a.code, "%s", a.body)
	r := a.receipt(t)
	assert.Equal(t, id, r.RunID)
	assert.Equal(t, sha(body), r.SHA256)
	assert.Equal(t, int64(len(body)), r.Bytes)
	assert.Equal(t, "stored", r.Status)
	assert.False(t, r.Duplicate)
	assert.WithinDuration(t, time.Now(), r.ServerTime, 5*time.Second)

	a = e.put(t, id, body, e.probeTok, "gzip")
	assert.Equal(t, http.StatusBadRequest, a.code, "plain bytes labelled gzip: %s", a.body)
	a = e.put(t, id, gz(body), e.probeTok, "gzip")
	require.Equal(t, http.StatusOK, a.code, "%s", a.body)
	d := a.receipt(t)
	assert.True(t, d.Duplicate)
	assert.Equal(t, r.SHA256, d.SHA256)
	assert.Equal(t, r.StoredAt, d.StoredAt, "the receipt of the stored copy")

	other := bytes.Replace(body, []byte("12.5"), []byte("13.5"), 1)
	a = e.put(t, id, other, e.probeTok, "")
	assert.Equal(t, http.StatusConflict, a.code, "%s", a.body)

	got := e.get(t, "/v1/runs/"+id, e.adminTok)
	require.Equal(t, http.StatusOK, got.code)
	assert.Equal(t, body, got.body, "byte-identical after a conflicting upload")
	assert.Equal(t, "application/x-ndjson", got.hdr.Get("Content-Type"))

	// One copy (a file in raw/ or a row), no temporary left.
	var raws []string
	filepath.WalkDir(filepath.Join(e.data, "raw"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			raws = append(raws, p)
		}
		return nil
	})
	assert.Len(t, raws, files)
	_, err := e.st.GetRaw(context.Background(), id)
	if files == 0 {
		assert.NoError(t, err, "kept in the database")
	} else {
		assert.ErrorIs(t, err, store.ErrNotFound)
	}
}

func TestEncodingsAndDocument(t *testing.T) {
	e := newEnv(t, nil)
	for _, c := range []struct {
		name, enc, file string
		wrap            func([]byte) []byte
	}{
		{"zstd stream", "zstd", "stream.jsonl", zs},
		{"gzip document", "gzip", "document.json", gz},
		{"plain document", "", "document.json", func(b []byte) []byte { return b }},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := uuid.NewString()
			body := fixture(t, c.file, id, "pi1", 0)
			a := e.put(t, id, c.wrap(body), e.probeTok, c.enc)
			require.Equal(t, http.StatusCreated, a.code, "%s", a.body)
			assert.Equal(t, sha(body), a.receipt(t).SHA256, "hash of the uncompressed upload")
			got := e.get(t, "/v1/runs/"+id, e.adminTok)
			assert.Equal(t, body, got.body)
		})
	}
	a := e.put(t, uuid.NewString(), []byte("x"), e.probeTok, "br")
	assert.Equal(t, http.StatusUnsupportedMediaType, a.code)
}

func TestBadRequestNamesPointerAndLine(t *testing.T) {
	e := newEnv(t, nil)
	id := uuid.NewString()
	lines := strings.Split(string(stream(t, id, "pi1")), "\n")
	// Line 3 is the rtt record; break its type.
	lines[2] = strings.Replace(lines[2], `"type":"rtt"`, `"type":""`, 1)
	a := e.put(t, id, []byte(strings.Join(lines, "\n")), e.probeTok, "")
	require.Equal(t, http.StatusBadRequest, a.code, "%s", a.body)
	var ae struct {
		Line    int    `json:"line"`
		Pointer string `json:"pointer"`
		Reason  string `json:"reason"`
	}
	require.NoError(t, json.Unmarshal(a.body, &ae))
	assert.Equal(t, 3, ae.Line)
	assert.Equal(t, "/type", ae.Pointer)
	assert.NotEmpty(t, ae.Reason)

	// A header field: started_at without nanoseconds, on line 1.
	lines = strings.Split(string(stream(t, id, "pi1")), "\n")
	lines[0] = strings.Replace(lines[0], "10:00:00.500000000Z", "10:00:00Z", 1)
	a = e.put(t, id, []byte(strings.Join(lines, "\n")), e.probeTok, "")
	require.Equal(t, http.StatusBadRequest, a.code)
	require.NoError(t, json.Unmarshal(a.body, &ae))
	assert.Equal(t, 1, ae.Line)
	assert.Equal(t, "/started_at", ae.Pointer)

	// A document's field: line 0 (not a stream), pointer into it.
	doc := strings.Replace(string(fixture(t, "document.json", id, "pi1", 0)), `"status": "partial"`, `"status": "fine"`, 1)
	a = e.put(t, id, []byte(doc), e.probeTok, "")
	require.Equal(t, http.StatusBadRequest, a.code, "%s", a.body)
	require.NoError(t, json.Unmarshal(a.body, &ae))
	assert.Equal(t, "/status", ae.Pointer)

	// The URL's run_id must be the body's.
	a = e.put(t, uuid.NewString(), stream(t, id, "pi1"), e.probeTok, "")
	require.Equal(t, http.StatusBadRequest, a.code)
	require.NoError(t, json.Unmarshal(a.body, &ae))
	assert.Equal(t, "/run_id", ae.Pointer)

	// Truncated: no trailer.
	a = e.put(t, id, []byte(strings.Join(lines[:2], "\n")), e.probeTok, "")
	assert.Equal(t, http.StatusBadRequest, a.code)
	a = e.put(t, "NOT-A-UUID", stream(t, id, "pi1"), e.probeTok, "")
	assert.Equal(t, http.StatusBadRequest, a.code)
	assert.Equal(t, http.StatusNotFound, e.get(t, "/v1/runs/"+id, e.adminTok).code, "nothing stored")
}

func TestAuth(t *testing.T) {
	e := newEnv(t, nil)
	id := uuid.NewString()
	body := stream(t, id, "pi1")
	assert.Equal(t, http.StatusUnauthorized, e.put(t, id, body, "", "").code)
	assert.Equal(t, http.StatusUnauthorized, e.put(t, id, body, collect.NewToken(), "").code)
	assert.Equal(t, http.StatusForbidden, e.put(t, id, body, e.adminTok, "").code, "admins do not upload")
	a := e.put(t, id, stream(t, id, "pi2"), e.probeTok, "")
	assert.Equal(t, http.StatusForbidden, a.code, "another probe's result: %s", a.body)
	assert.Contains(t, string(a.body), "/probe_id")

	assert.Equal(t, http.StatusUnauthorized, e.get(t, "/v1/runs", "").code)
	assert.Equal(t, http.StatusForbidden, e.get(t, "/v1/runs", e.probeTok).code, "probes do not read")
	assert.Equal(t, http.StatusForbidden, e.get(t, "/metrics", e.probeTok).code)

	// A revocation is another process's write; this collector may answer
	// from its token cache (its entry dates from a look-up before the
	// revocation) for at most collect.TokenTTL after it, and no longer.
	require.NoError(t, e.st.Revoke(context.Background(), "pi1", time.Now()))
	revoked := time.Now()
	time.Sleep(time.Until(revoked.Add(collect.TokenTTL)))
	assert.Equal(t, http.StatusUnauthorized, e.get(t, "/v1/runs", e.probeTok).code, "revoked token still accepted TokenTTL after the revocation")
	assert.Equal(t, http.StatusUnauthorized, e.put(t, id, body, e.probeTok, "").code, "revoked")
}

func TestTooLarge(t *testing.T) {
	e := newEnv(t, func(l *collect.Limits) { l.MaxBytes, l.MaxDocument = 2000, 1000 })
	id := uuid.NewString()
	body := stream(t, id, "pi1") // about 1.6 kB
	big := bytes.Repeat([]byte(" "), 3000)
	assert.Equal(t, http.StatusRequestEntityTooLarge, e.put(t, id, append(append([]byte{}, body...), big...), e.probeTok, "").code, "by Content-Length")
	// A small gzip body that inflates beyond the limit: counted after decompression.
	bomb := strings.Repeat(`{"type":"rtt","path":"wwan0","target":"198.18.9.1","ms":1}`+"\n", 100)
	a := e.put(t, id, gz([]byte(string(body[:bytes.IndexByte(body, '\n')+1])+bomb)), e.probeTok, "gzip")
	assert.Equal(t, http.StatusRequestEntityTooLarge, a.code, "%s", a.body)
	doc := fixture(t, "document.json", id, "pi1", 0) // > 1000 bytes
	assert.Equal(t, http.StatusRequestEntityTooLarge, e.put(t, id, doc, e.probeTok, "").code, "document over MaxDocument")
	assert.Equal(t, http.StatusCreated, e.put(t, id, body, e.probeTok, "").code)
}

func TestOverloadedRetryAfter(t *testing.T) {
	e := newEnv(t, func(l *collect.Limits) { l.MaxInFlight, l.RetryAfter = 1, 3*time.Second })
	id := uuid.NewString()
	body := stream(t, id, "pi1")
	// The first upload sends its headers and half its body by hand, so it
	// holds the only slot while the others knock.
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	fmt.Fprintf(conn, "PUT /v1/runs/%s HTTP/1.1\r\nHost: collect\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n", id, e.probeTok, len(body))
	conn.Write(body[:100])
	require.Eventually(t, func() bool {
		return strings.Contains(string(e.get(t, "/metrics", e.adminTok).body), "mptester_collect_uploads_in_flight 1")
	}, 5*time.Second, 10*time.Millisecond, "the first upload holds the slot")
	var a answer
	require.Eventually(t, func() bool {
		a = e.put(t, uuid.NewString(), body, e.probeTok, "")
		return a.code == http.StatusTooManyRequests
	}, 5*time.Second, 20*time.Millisecond)
	assert.Equal(t, "3", a.hdr.Get("Retry-After"))
	conn.Write(body[100:])
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
}

func TestNewerSchemaMajorStoredUnparsed(t *testing.T) {
	e := newEnv(t, nil)
	id := uuid.NewString()
	// A 2.x stream with a field 1.x forbids: kept raw, answered 202.
	body := regexp.MustCompile(`"schema_version":"1\.[0-9]+"`).ReplaceAllString(string(stream(t, id, "pi1")), `"schema_version":"2.0","new_field":{"x":1}`)
	a := e.put(t, id, []byte(body), e.probeTok, "")
	require.Equal(t, http.StatusAccepted, a.code, "%s", a.body)
	assert.Equal(t, "unparsed", a.receipt(t).Status)
	assert.Equal(t, []byte(body), e.get(t, "/v1/runs/"+id, e.adminTok).body)
	a = e.put(t, id, []byte(body), e.probeTok, "")
	assert.Equal(t, http.StatusOK, a.code)
	assert.True(t, a.receipt(t).Duplicate)
	// Still the token's own probe only.
	id2 := uuid.NewString()
	a = e.put(t, id2, []byte(strings.ReplaceAll(strings.ReplaceAll(body, id, id2), `"pi1"`, `"pi9"`)), e.probeTok, "")
	assert.Equal(t, http.StatusForbidden, a.code)
	// A 2.x document too.
	id3 := uuid.NewString()
	doc := regexp.MustCompile(`"schema_version": "1\.[0-9]+"`).ReplaceAllString(string(fixture(t, "document.json", id3, "pi1", 0)), `"schema_version": "2.1"`)
	assert.Equal(t, http.StatusAccepted, e.put(t, id3, []byte(doc), e.probeTok, "").code)
}

func TestReads(t *testing.T) {
	e := newEnv(t, nil)
	var ids []string
	for i := 0; i < 7; i++ {
		id := uuid.NewString()
		ids = append(ids, id)
		req, _ := http.NewRequest(http.MethodPut, e.url+"/v1/runs/"+id, bytes.NewReader(stream(t, id, "pi1")))
		req.Header.Set("Authorization", "Bearer "+e.probeTok)
		req.Header.Set(collect.HeaderBacklog, fmt.Sprint(6-i))
		req.Header.Set(collect.HeaderPath, "wlan0")
		a := do(t, req)
		require.Equal(t, http.StatusCreated, a.code)
		assert.Equal(t, "wlan0", a.receipt(t).UploadPath)
	}
	var got []string
	next := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		a := e.get(t, "/v1/runs?probe=pi1&type=survey&limit=3&after="+next, e.adminTok)
		require.Equal(t, http.StatusOK, a.code, "%s", a.body)
		var page collect.RunPage
		require.NoError(t, json.Unmarshal(a.body, &page))
		for _, r := range page.Runs {
			got = append(got, r.RunID)
		}
		if page.Next == "" {
			break
		}
		next = page.Next
	}
	assert.Equal(t, ids, got)
	a := e.get(t, "/v1/runs?type=run", e.adminTok)
	assert.Contains(t, string(a.body), `"runs":[]`)
	assert.Equal(t, http.StatusBadRequest, e.get(t, "/v1/runs?since=yesterday", e.adminTok).code)

	a = e.get(t, "/v1/probes", e.adminTok)
	require.Equal(t, http.StatusOK, a.code)
	var ps struct{ Probes []store.Probe }
	require.NoError(t, json.Unmarshal(a.body, &ps))
	require.Len(t, ps.Probes, 1)
	assert.Equal(t, int64(7), ps.Probes[0].Runs)
	assert.Equal(t, int64(0), ps.Probes[0].Backlog)
	assert.Equal(t, "ok", ps.Probes[0].LastStatus)

	assert.Equal(t, http.StatusOK, e.get(t, "/healthz", "").code)
	m := e.get(t, "/metrics", e.adminTok)
	require.Equal(t, http.StatusOK, m.code)
	assert.Contains(t, string(m.body), `mptester_collect_uploads_total{result="stored"} 7`)
	assert.Contains(t, string(m.body), `mptester_collect_probe_last_seen_seconds{probe="pi1"}`)
	assert.Contains(t, string(m.body), "mptester_collect_ingest_seconds_count 7")
	assert.Equal(t, http.StatusNotFound, e.get(t, "/v1/runs/"+uuid.NewString(), e.adminTok).code)
}

// blockingDerive is a store whose derived-table writes wait for release,
// whatever their context says: a deriver caught mid-write at shutdown.
type blockingDerive struct {
	store.Store
	entered chan struct{}
	release chan struct{}
}

func (b *blockingDerive) PutDerivedStream(ctx context.Context, runID string, fill func(store.DerivedSink) error) error {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-b.release
	return b.Store.PutDerivedStream(ctx, runID, fill)
}

// Serve returns only after its deriver has stopped: the caller closes the
// store next, and a deriver still writing to it raced with that close (a
// data race the race detector found in CI).
func TestServeWaitsForDeriver(t *testing.T) {
	bd := &blockingDerive{entered: make(chan struct{}, 1), release: make(chan struct{})}
	e := newEnvWith(t, func(c *collect.Config) { bd.Store = c.Store; c.Store = bd })
	released := sync.OnceFunc(func() { close(bd.release) })
	t.Cleanup(released) // runs before the env's cleanup, which waits for Serve
	id := uuid.NewString()
	require.Equal(t, http.StatusCreated, e.put(t, id, stream(t, id, "pi1"), e.probeTok, "").code)
	<-bd.entered // the deriver is writing this run's derived rows
	e.cancel()
	select {
	case err := <-e.done:
		e.done <- err // for the cleanup
		t.Fatalf("Serve returned (%v) while its deriver was still writing to the store", err)
	case <-time.After(300 * time.Millisecond):
	}
	released()
	select {
	case err := <-e.done:
		require.NoError(t, err)
		e.done <- err // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its deriver stopped")
	}
}

// page is GET path in a browser signed in with the admin token: the
// cookie POST /login sets, sent back.
func (e *env) page(t testing.TB, path string) answer {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(e.url+"/login", url.Values{"token": {e.adminTok}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	req, err := http.NewRequest(http.MethodGet, e.url+path, nil)
	require.NoError(t, err)
	for _, ck := range resp.Cookies() {
		req.AddCookie(ck)
	}
	return do(t, req)
}
