//go:build linux && !race

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/pgtest"
)

// loadKill: clients probes, each draining runs spooled results with
// `mptester upload` in a loop, while chaos() disturbs the pipeline; then
// every receipted run is stored byte-identical exactly once and every
// spool is empty.
func loadKill(t *testing.T, clients, runs, pad int, db string, chaos func(ctx context.Context, c *collector, ps []*probeEnv)) {
	if testing.Short() {
		t.Skip("real-process load test")
	}
	c := newCollector(t, filepath.Join(t.TempDir(), "data"), db)
	want := map[string][]byte{}
	var ps []*probeEnv
	for i := 0; i < clients; i++ {
		p := newProbe(t, c, fmt.Sprintf("p%02d", i), "")
		ps = append(ps, p)
		for j := 0; j < runs; j++ {
			id := uuid.NewString()
			n := pad + rand.IntN(pad+1)
			if pad == 0 && j%4 == 0 {
				n = 3000 // past 128 kB: kept as a file, not in the database
			}
			want[id] = fixture(t, id, p.name, n)
			spoolFixture(t, p.spool, id, want[id])
		}
	}
	c.start()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	chaosCtx, stopChaos := context.WithCancel(ctx)
	chaosDone := make(chan struct{})
	go func() { defer close(chaosDone); chaos(chaosCtx, c, ps) }()

	var mu sync.Mutex
	receipted := map[string]int{}
	runsOf := map[string]int{}
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func(p *probeEnv) {
			defer wg.Done()
			for ctx.Err() == nil {
				code, ids, err := p.uploadOnce(ctx)
				mu.Lock()
				for _, id := range ids {
					receipted[id]++
				}
				runsOf[p.name]++
				mu.Unlock()
				if err == nil && code == 0 {
					if n, _ := pending(t, p.spool); n == 0 {
						return
					}
				}
				time.Sleep(50 * time.Millisecond)
			}
		}(p)
	}
	wg.Wait()
	stopChaos()
	<-chaosDone
	require.NoError(t, ctx.Err(), "clients did not drain in time")
	c.kill()

	got, files := storedFiles(t, c)
	for id := range receipted {
		assert.Contains(t, got, id, "a receipted run is stored")
	}
	assert.Len(t, got, len(want), "every run stored once, nothing extra")
	for id, b := range want {
		if !assert.Equal(t, b, got[id], "run %s byte-identical", id) {
			break
		}
	}
	for _, p := range ps {
		n, rej := pending(t, p.spool)
		assert.Zero(t, n, "%s spool drained", p.name)
		assert.Zero(t, rej, "%s nothing rejected", p.name)
	}
	raws := 0
	filepath.WalkDir(filepath.Join(c.data, "raw"), func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasPrefix(d.Name(), ".tmp-") {
			raws++
		}
		return nil
	})
	assert.Equal(t, files, raws, "one raw file per run kept as a file, no orphan")
	total := 0
	for _, n := range runsOf {
		total += n
	}
	t.Logf("%d runs from %d clients: %d receipts logged, %d upload processes", len(want), clients, len(receipted), total)
}

// TestServerKilledDuringLoad: SIGKILL the collector at random moments
// (every 0.3-1.2 s) and restart it.
func TestServerKilledDuringLoad(t *testing.T) {
	kills := 0
	loadKill(t, 16, 150, 0, "", func(ctx context.Context, c *collector, _ []*probeEnv) {
		kills = killEvery(ctx, c)
		t.Logf("collector killed %d times", kills)
	})
	assert.Positive(t, kills)
}

// TestClientKilledDuringUpload: larger runs, and SIGKILL to upload
// processes mid-body; their lock dies with them and the next run resends.
func TestClientKilledDuringUpload(t *testing.T) {
	killed := 0
	loadKill(t, 6, 30, 5000, "", func(ctx context.Context, c *collector, ps []*probeEnv) {
		for killed < 30 {
			select {
			case <-ctx.Done():
				t.Logf("upload processes killed %d times", killed)
				return
			case <-time.After(200*time.Millisecond + rand.N(800*time.Millisecond)):
			}
			out, _ := exec.Command("pgrep", "-f", "^"+bin+" upload").Output()
			var pid int
			if n, _ := fmt.Sscan(string(out), &pid); n == 1 && pid > 0 {
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					killed++
				}
			}
		}
		t.Logf("upload processes killed %d times", killed)
	})
	assert.Positive(t, killed)
}

// TestServerKilledDuringLoadPostgres: the same with the index on a real
// PostgreSQL server (started by the test, or MPTESTER_TEST_PG_DSN).
func TestServerKilledDuringLoadPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	kills := 0
	loadKill(t, 8, 100, 0, dsn, func(ctx context.Context, c *collector, _ []*probeEnv) {
		kills = killEvery(ctx, c)
		t.Logf("collector killed %d times", kills)
	})
	assert.Positive(t, kills)
}
