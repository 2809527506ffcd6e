//go:build linux && !race

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect/store"
)

// TestOutageThenDrain: the collector is down while a probe measures three
// times (`mptester run` against `mptester serve` on loopback): each run
// exits 8 (measured, not uploaded) with its result spooled; the collector
// comes back and `mptester upload` drains the spool, every result stored
// byte-identical to the probe's own output file, once.
func TestOutageThenDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := newCollector(t, filepath.Join(t.TempDir(), "data"), "")
	// Uploads bound to a path (lo here) through package probe's dialer.
	p := newProbe(t, c, "pi-outage", "  path: lo\n")

	port := startServe(t)

	outputs := map[string][]byte{}
	for i := 0; i < 3; i++ {
		file := filepath.Join(p.dir, fmt.Sprintf("run%d.json", i))
		cmd := exec.Command(bin, "run", "--config", p.config, "--server", fmt.Sprintf("127.0.0.1:%d", port),
			"--patterns", "ping", "--transports", "tcp", "--paths", "lo", "--insecure", "--pace", "0s", "-o", file)
		b, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "%s", b)
		require.Equal(t, 8, ee.ExitCode(), "measured but not uploaded: %s", b)
		doc, err := os.ReadFile(file)
		require.NoError(t, err)
		id := regexp.MustCompile(`"run_id": "([0-9a-f-]{36})"`).FindSubmatch(doc)
		require.NotNil(t, id)
		outputs[string(id[1])] = doc
	}
	n, _ := pending(t, p.spool)
	require.Equal(t, 3, n)
	st, err := exec.Command(bin, "upload", "--status", "--config", p.config).CombinedOutput()
	require.NoError(t, err, "%s", st)
	assert.Contains(t, string(st), "3 pending, 0 rejected")

	c.start()
	code, ids, err := p.uploadOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 0, code)
	assert.Len(t, ids, 3)
	code, ids, err = p.uploadOnce(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 0, code)
	assert.Empty(t, ids, "nothing sent twice")
	c.kill()
	assert.Equal(t, outputs, stored(t, c))
	idx, err := store.Open(context.Background(), filepath.Join(c.data, "collect.db"))
	require.NoError(t, err)
	defer idx.Close()
	for id := range outputs {
		r, err := idx.GetRun(context.Background(), id)
		require.NoError(t, err)
		assert.Equal(t, "lo", r.UploadPath, "the receipt records the path the upload took")
	}
}

// TestFullDiskAnswers5xx: the collector's data directory is a small tmpfs;
// uploads fill it until the server answers 5xx; every run receipted
// before is stored byte-identical, and what was refused stays spooled.
func TestFullDiskAnswers5xx(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("the full-disk test needs root (tmpfs mount)")
		}
		t.Skip("needs root to mount a tmpfs")
	}
	data := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.MkdirAll(data, 0o700))
	if b, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", data).CombinedOutput(); err != nil {
		t.Skipf("cannot mount tmpfs: %v %s", err, b)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", data).Run() })
	c := newCollector(t, data, "")
	p := newProbe(t, c, "pi-full", "")
	want := map[string][]byte{}
	for i := 0; i < 24; i++ { // 24 x ~400 kB: far beyond 4 MB
		id := uuid.NewString()
		want[id] = fixture(t, id, p.name, 5000)
		spoolFixture(t, p.spool, id, want[id])
	}
	c.start()
	cmd := exec.Command(bin, "upload", "--config", p.config)
	b, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "%s", b)
	assert.Equal(t, 8, ee.ExitCode())
	assert.Regexp(t, `collector answered 5\d\d`, string(b))
	receipted := regexp.MustCompile(`msg=uploaded run_id=([0-9a-f-]{36})`).FindAllStringSubmatch(string(b), -1)
	require.NotEmpty(t, receipted, "some fit before the disk filled")
	c.kill()
	got := stored(t, c)
	for _, m := range receipted {
		assert.Equal(t, want[m[1]], got[m[1]], "receipted run %s stored byte-identical", m[1])
	}
	assert.Len(t, got, len(receipted), "only receipted runs are in the index")
	n, rej := pending(t, p.spool)
	assert.Equal(t, len(want)-len(receipted), n, "the refused runs stay spooled")
	assert.Zero(t, rej, "a full disk is not a rejection")
	t.Logf("%d of %d runs stored before the 4 MB tmpfs filled", len(receipted), len(want))
}
