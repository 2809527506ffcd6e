//go:build linux && !race

package e2e

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"crypto/tls"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect/rawstore"
	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/internal/pgtest"
	"github.com/mptester/mptester/internal/s3test"
)

// TestReplicas: two collectors on one PostgreSQL and one S3 bucket, each
// with its own data directory and port and no certificate of its own
// (they share the identity kept in the database). 50 probes spread their
// uploads over both while each collector is SIGKILLed and restarted twice
// at random moments. Then every run that got a 2xx receipt is stored once
// and byte-identical from either replica, and after `collect gc` every
// object in the bucket is named by an index row.
func TestReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("real-process load test")
	}
	dsn := pgtest.DSN(t)
	s3 := s3test.Start(t, "")
	s3.Bucket(t, "fleet", "", "")
	rawFlags := []string{"--raw", "s3://fleet/collect", "--s3-endpoint", s3.Endpoint, "--s3-region", "us-east-1",
		"--s3-path-style", "--raw-inline-max", "0"}
	var cs []*collector
	for i := range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		l.Close()
		c := &collector{t: t, data: filepath.Join(t.TempDir(), fmt.Sprintf("data%d", i)), db: dsn, addr: addr,
			url: "https://" + addr, extra: rawFlags}
		t.Cleanup(c.kill)
		c.start()
		cs = append(cs, c)
	}
	require.Equal(t, cs[0].pin, cs[1].pin, "replicas present one identity")
	require.NotEmpty(t, cs[0].pin)
	for _, c := range cs {
		resp, err := insecure().Get(c.url + "/healthz")
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	}

	const clients, runs = 50, 12
	want := map[string][]byte{}
	type probe struct {
		*probeEnv
		configs [2]string
	}
	var ps []probe
	for i := range clients {
		p := probe{probeEnv: newProbe(t, cs[0], fmt.Sprintf("p%02d", i), "")}
		b, err := os.ReadFile(p.config)
		require.NoError(t, err)
		p.configs[0] = p.config
		p.configs[1] = p.config + ".b.yaml"
		other := regexp.MustCompile(`url: \S+`).ReplaceAll(b, []byte("url: "+cs[1].url))
		require.NoError(t, os.WriteFile(p.configs[1], other, 0o600))
		ps = append(ps, p)
		for range runs {
			id := uuid.NewString()
			want[id] = fixture(t, id, p.name, rand.IntN(40))
			spoolFixture(t, p.spool, id, want[id])
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var kills sync.WaitGroup
	killed := make([]int, len(cs))
	for i, c := range cs {
		kills.Go(func() {
			for range 2 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(500*time.Millisecond + rand.N(3*time.Second)):
				}
				c.kill()
				killed[i]++
				time.Sleep(rand.N(500 * time.Millisecond))
				c.start()
			}
		})
	}
	var mu sync.Mutex
	receipted := map[string]int{}
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() {
			for ctx.Err() == nil {
				p.config = p.configs[rand.IntN(2)] // any replica takes any upload
				code, ids, err := p.uploadOnce(ctx)
				mu.Lock()
				for _, id := range ids {
					receipted[id]++
				}
				mu.Unlock()
				if err == nil && code == 0 {
					if n, _ := pending(t, p.spool); n == 0 {
						return
					}
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	kills.Wait()
	require.NoError(t, ctx.Err(), "clients did not drain in time")
	assert.Equal(t, []int{2, 2}, killed, "each replica killed twice")
	for _, p := range ps {
		n, rej := pending(t, p.spool)
		assert.Zero(t, n, "%s spool drained", p.name)
		assert.Zero(t, rej, "%s nothing rejected", p.name)
	}

	// Every receipted run: one index row, its object byte-identical.
	st, err := store.Open(context.Background(), dsn)
	require.NoError(t, err)
	defer st.Close()
	raw, err := rawstore.NewS3(rawstore.S3Config{Bucket: "fleet", Prefix: "collect", Endpoint: s3.Endpoint, Region: "us-east-1",
		PathStyle: true, Spool: t.TempDir()})
	require.NoError(t, err)
	rows := map[string]store.Run{}
	var after int64
	for {
		page, err := st.ListRuns(context.Background(), store.RunFilter{After: after})
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			require.NotContains(t, rows, r.RunID, "one row per run")
			rows[r.RunID] = r
		}
		after = page[len(page)-1].Seq
	}
	assert.Len(t, rows, len(want), "every run stored once, nothing extra")
	for id := range receipted {
		assert.Contains(t, rows, id, "a receipted run is stored")
	}
	for id, r := range rows {
		rc, err := raw.Open(context.Background(), r.RawPath)
		require.NoError(t, err, id)
		b, err := io.ReadAll(rc)
		rc.Close()
		require.NoError(t, err)
		if !assert.Equal(t, want[id], b, "run %s byte-identical in the bucket", id) {
			break
		}
	}
	// ... and from either replica's API.
	out, err := exec.Command(bin, cs[0].args("admin", "add", "ops")...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	admin := regexp.MustCompile(`[0-9a-f]{64}`).Find(out)
	n := 0
	for id := range receipted {
		if n++; n > 40 {
			break
		}
		for _, c := range cs {
			req, _ := http.NewRequest(http.MethodGet, c.url+"/v1/runs/"+id, nil)
			req.Header.Set("Authorization", "Bearer "+string(admin))
			resp, err := insecure().Do(req)
			require.NoError(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, want[id], b, "run %s from %s", id, c.url)
		}
	}
	for _, c := range cs {
		c.kill()
	}

	// No object without an index row once gc has run.
	out, err = exec.Command(bin, cs[0].args(append([]string{"gc", "--min-age", "0s"}, rawFlags...)...)...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Logf("gc: %s", out)
	objs := 0
	require.NoError(t, raw.List(context.Background(), func(o rawstore.Info) error {
		objs++
		id, _, _ := rawstore.ParseKey(o.Key)
		r, ok := rows[id]
		assert.True(t, ok && r.RawPath == o.Key, "object %s is named by an index row", o.Key)
		return nil
	}))
	assert.Equal(t, len(rows), objs, "one object per run")
	t.Logf("%d runs from %d probes over 2 replicas, %d receipts logged", len(want), clients, len(receipted))
}

// insecure is a client for the replicas' shared self-signed certificate
// (the probes pin it; this only reads).
func insecure() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
}
