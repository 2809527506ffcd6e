//go:build linux && !race

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/internal/certs"
)

// enrolMany enrols n probes prefix0..prefix(n-1) straight into the index
// (the collector not running) and returns their tokens.
func enrolMany(t testing.TB, c *collector, prefix string, n int) []string {
	require.NoError(t, os.MkdirAll(c.data, 0o750))
	st, err := store.Open(context.Background(), filepath.Join(c.data, "collect.db"))
	require.NoError(t, err)
	defer st.Close()
	toks := make([]string, n)
	for i := range toks {
		toks[i] = collect.NewToken()
		require.NoError(t, st.AddProbe(context.Background(), prefix+strconv.Itoa(i), collect.HashToken(toks[i]), time.Now()))
	}
	return toks
}

// pinnedClient trusts the collector's pinned certificate only.
func (c *collector) tlsConfig(t testing.TB) *tls.Config {
	pin, err := certs.ParseFingerprint(c.pin)
	require.NoError(t, err)
	return certs.Pinned("", pin)
}

func (c *collector) client(t testing.TB, conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: c.tlsConfig(t), MaxIdleConnsPerHost: conns}}
}

// put uploads body as run id with tok and returns the status.
func put(ctx context.Context, hc *http.Client, url, id, tok string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url+"/v1/runs/"+id, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// slowClientsN is the number of body tricklers and of header tricklers:
// 100 in CI; scripts/bench-collect-harden runs 1,000 of each.
func slowClientsN() int {
	if n, err := strconv.Atoi(os.Getenv("MPTESTER_SLOW_CLIENTS")); err == nil && n > 0 {
		return n
	}
	return 100
}

// TestSlowClientsDoNotLockOut: N TLS connections trickle upload bodies (one
// byte a second, valid probe tokens of 25 attacking probes) and N send
// their headers a byte a second, while 20 good probes upload 5 runs each
// to a real collector process with its default limits. No good upload is
// refused; every trickling body is cut (408, or 429 past its probe's 4
// slots) within the 5 s rate window and every slow header within the 10 s
// header timeout (each plus 10 s of slack for a loaded machine).
func TestSlowClientsDoNotLockOut(t *testing.T) {
	n := slowClientsN()
	c := newCollector(t, filepath.Join(t.TempDir(), "data"), "")
	good := enrolMany(t, c, "good", 20)
	evil := enrolMany(t, c, "evil", 25)
	c.start()
	cfg := c.tlsConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	type closed struct {
		after time.Duration
		kind  string
	}
	results := make(chan closed, 2*n)
	var wg sync.WaitGroup
	var dialErrs atomic.Int64
	slow := func(kind string, i int) {
		defer wg.Done()
		conn, err := tls.Dial("tcp", c.addr, cfg)
		if err != nil {
			dialErrs.Add(1)
			return
		}
		defer conn.Close()
		var pre, trickle []byte
		if kind == "body" {
			pre = fmt.Appendf(nil, "PUT /v1/runs/%s HTTP/1.1\r\nHost: collect\r\nAuthorization: Bearer %s\r\nContent-Length: 100000\r\n\r\n", uuid.NewString(), evil[i%len(evil)])
			trickle = bytes.Repeat([]byte(" "), 100000)
		} else {
			trickle = fmt.Appendf(nil, "PUT /v1/runs/%s HTTP/1.1\r\nHost: collect\r\nAuthorization: Bearer %s\r\nContent-Length: 10\r\n\r\n", uuid.NewString(), evil[i%len(evil)])
		}
		if _, err := conn.Write(pre); err != nil {
			return
		}
		start := time.Now()
		done := make(chan struct{})
		go func() {
			defer close(done)
			io.Copy(io.Discard, conn) // until the server closes
		}()
		for j := 0; j < len(trickle); j++ {
			select {
			case <-done:
				results <- closed{time.Since(start), kind}
				return
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
				conn.Write(trickle[j : j+1])
			}
		}
	}
	for i := range n {
		wg.Add(2)
		go slow("body", i)
		go slow("header", i)
	}
	// The good probes start once the slow connections are in.
	time.Sleep(3 * time.Second)
	hc := c.client(t, 20)
	var gwg sync.WaitGroup
	var mu sync.Mutex
	var waits []time.Duration
	var refused []string
	for p := range good {
		gwg.Add(1)
		go func() {
			defer gwg.Done()
			for range 5 {
				id := uuid.NewString()
				start := time.Now()
				code, err := put(ctx, hc, c.url, id, good[p], fixture(t, id, "good"+strconv.Itoa(p), 0))
				mu.Lock()
				waits = append(waits, time.Since(start))
				if err != nil || code != http.StatusCreated {
					refused = append(refused, fmt.Sprintf("good%d: %d %v", p, code, err))
				}
				mu.Unlock()
			}
		}()
	}
	gwg.Wait()
	wg.Wait()
	close(results)
	assert.Empty(t, refused, "no good upload is refused")
	assert.Zero(t, dialErrs.Load(), "every slow connection was accepted")
	limit := map[string]time.Duration{"body": 5 * time.Second, "header": 10 * time.Second}
	worst := map[string]time.Duration{}
	count := map[string]int{}
	for r := range results {
		count[r.kind]++
		worst[r.kind] = max(worst[r.kind], r.after)
		assert.Less(t, r.after, limit[r.kind]+10*time.Second, "a slow %s connection stayed open", r.kind)
	}
	assert.Equal(t, n, count["body"], "every trickling body was cut")
	assert.Equal(t, n, count["header"], "every slow header was cut")
	slices.Sort(waits)
	t.Logf("%d+%d slow connections: body cut after at most %s, headers after at most %s; good uploads: %d, p50 %s, max %s",
		n, n, worst["body"].Round(time.Millisecond), worst["header"].Round(time.Millisecond), len(waits),
		waits[len(waits)/2].Round(time.Millisecond), waits[len(waits)-1].Round(time.Millisecond))
	if os.Getenv("MPTESTER_SLOW_CLIENTS") != "" {
		// The full-size run (a script, not CI) holds the 2 s bound.
		assert.Less(t, waits[len(waits)-1], 2*time.Second, "a good upload waited")
	}
	_ = net.IPv4len
}

// bigBody is an upload of about size bytes for run id by probe whose
// records (survey-shaped probe records) are shared by every upload:
// doc, a JSON document; else a JSON Lines stream.
type bigBody struct {
	records []byte // joined by "," (doc) or lines
	zrec    []byte // records as one zstd frame, when zstd
	zstd    bool
	n       int
	doc     bool
	pre     string // with ID and PROBE placeholders
	post    string
}

func newBigBody(t testing.TB, size int, doc bool) *bigBody {
	s := surveyStream(size)
	lines := bytes.SplitAfter(s, []byte("\n"))
	recs := lines[1 : len(lines)-2] // header, ..., trailer, ""
	b := &bigBody{n: len(recs), doc: doc}
	if doc {
		for i, r := range recs {
			if i > 0 {
				b.records = append(b.records, ',')
			}
			b.records = append(b.records, bytes.TrimSuffix(r, []byte("\n"))...)
		}
		d := string(fixtureDoc(t))
		d = strings.Replace(d, `"run_id": "0f8c3f6e-3c1a-4c36-9a55-1f2d1c5e7a10"`, `"run_id": "ID"`, 1)
		d = strings.Replace(d, `"probe_id": "bench"`, `"probe_id": "PROBE"`, 1)
		i := strings.Index(d, `"records": [`)
		j := strings.LastIndex(d, "]")
		require.True(t, i > 0 && j > i)
		b.pre, b.post = d[:i]+`"records": [`, d[j:]
		return b
	}
	b.records = bytes.Join(recs, nil)
	b.pre = strings.NewReplacer("0f8c3f6e-3c1a-4c36-9a55-1f2d1c5e7a10", "ID", `"bench"`, `"PROBE"`).Replace(string(lines[0]))
	b.post = strings.Replace(string(lines[len(lines)-2]), "0f8c3f6e-3c1a-4c36-9a55-1f2d1c5e7a10", "ID", 1)
	return b
}

// compressZstd is how the uploader compresses (upload/client.go).
func compressZstd(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
	require.NoError(t, err)
	_, err = w.Write(b)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return buf.Bytes()
}

func (b *bigBody) reader(id, probe string) (io.Reader, int64) {
	pre := strings.NewReplacer("ID", id, "PROBE", probe).Replace(b.pre)
	post := strings.Replace(b.post, "ID", id, 1)
	if b.zstd { // concatenated frames decode to the concatenated content
		zp, zq := zstdEnc.EncodeAll([]byte(pre), nil), zstdEnc.EncodeAll([]byte(post), nil)
		return io.MultiReader(bytes.NewReader(zp), bytes.NewReader(b.zrec), bytes.NewReader(zq)), int64(len(zp) + len(b.zrec) + len(zq))
	}
	return io.MultiReader(strings.NewReader(pre), bytes.NewReader(b.records), strings.NewReader(post)), int64(len(pre) + len(b.records) + len(post))
}

// BenchmarkConcurrentPeakRSS: 32 probes upload at once to a fresh
// collector process (default limits), 15 MB JSON documents or 40 MB survey
// streams; the collector's peak RSS (VmHWM) once all 32 are receipted and
// their derived rows are in.
func BenchmarkConcurrentPeakRSS(b *testing.B) {
	for _, c := range []struct {
		name string
		size int
		doc  bool
		zstd bool
	}{{"32x15MB-documents", 15 << 20, true, false}, {"32x40MB-streams", 40 << 20, false, false},
		{"32x15MB-documents-zstd", 15 << 20, true, true}, {"32x40MB-streams-zstd", 40 << 20, false, true}} {
		b.Run(c.name, func(b *testing.B) {
			body := newBigBody(b, c.size, c.doc)
			if c.zstd {
				body.zstd, body.zrec = true, compressZstd(b, body.records)
			}
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				data := filepath.Join(b.TempDir(), "data")
				col := newCollector(b, data, "")
				toks := enrolMany(b, col, "p", 32)
				col.start()
				idle := peakRSSMB(col)
				hc := col.client(b, 32)
				b.StartTimer()
				start := time.Now()
				var wg sync.WaitGroup
				var retries atomic.Int64
				codes := make([]int, 32)
				for p := range 32 {
					wg.Go(func() {
						id := uuid.NewString()
						for {
							r, n := body.reader(id, "p"+strconv.Itoa(p))
							req, err := http.NewRequest(http.MethodPut, col.url+"/v1/runs/"+id, r)
							if err != nil {
								return
							}
							req.ContentLength = n
							req.Header.Set("Authorization", "Bearer "+toks[p])
							if body.zstd {
								req.Header.Set("Content-Encoding", "zstd")
							}
							resp, err := hc.Do(req)
							if err != nil {
								b.Log(err)
								return
							}
							msg, _ := io.ReadAll(resp.Body)
							resp.Body.Close()
							codes[p] = resp.StatusCode
							if resp.StatusCode == http.StatusTooManyRequests {
								// As the uploader does: wait as asked, retry.
								retries.Add(1)
								wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
								time.Sleep(time.Duration(wait) * time.Second)
								continue
							}
							if resp.StatusCode != http.StatusCreated {
								b.Logf("%d: %s", resp.StatusCode, msg)
							}
							return
						}
					})
				}
				wg.Wait()
				receipted := time.Since(start)
				for _, code := range codes {
					require.Equal(b, http.StatusCreated, code)
				}
				atReceipt := peakRSSMB(col)
				db, err := sql.Open("sqlite", filepath.Join(data, "collect.db"))
				require.NoError(b, err)
				deadline := time.Now().Add(10 * time.Minute)
				for n := 0; n < 32*body.n; time.Sleep(time.Second) {
					require.NoError(b, db.QueryRow(`SELECT COUNT(*) FROM survey_probes`).Scan(&n))
					require.True(b, time.Now().Before(deadline), "derived rows: %d of %d", n, 32*body.n)
				}
				db.Close()
				b.StopTimer()
				b.ReportMetric(idle, "idle_RSS_MB")
				b.ReportMetric(atReceipt, "peak_RSS_at_receipts_MB")
				b.ReportMetric(peakRSSMB(col), "server_peak_RSS_MB")
				b.ReportMetric(receipted.Seconds(), "s_to_32_receipts")
				b.ReportMetric(float64(retries.Load()), "retries_after_429")
				col.kill()
				b.StartTimer()
			}
		})
	}
}

var zstdEnc, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
