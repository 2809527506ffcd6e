package collect

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect/rawstore"
	"github.com/mptester/mptester/internal/cmdutil"
)

// plantRaw stores body as a committed raw object no index row names (an
// upload cut off by a crash before its receipt), last modified at mod.
func plantRaw(t *testing.T, data string, body []byte, mod time.Time) string {
	t.Helper()
	d, err := rawstore.NewDir(data)
	require.NoError(t, err)
	o, err := d.Create(context.Background(), uuid.NewString())
	require.NoError(t, err)
	_, err = o.Write(body)
	require.NoError(t, err)
	sum := sha256.Sum256(body)
	key, err := o.Commit(context.Background(), hex.EncodeToString(sum[:]))
	require.NoError(t, err)
	p := filepath.Join(data, filepath.FromSlash(key))
	require.NoError(t, os.Chtimes(p, mod, mod))
	return p
}

// TestGCCLI: gc counts the raw objects no run names, spares those younger
// than --min-age, and with --dry-run removes nothing; the store flags given
// after the subcommand reach it.
func TestGCCLI(t *testing.T) {
	data := t.TempDir()
	_, err := execute(t, "--data", data, "probe", "list") // creates the index
	require.NoError(t, err)
	old := plantRaw(t, data, []byte(`{"old":1}`), time.Now().Add(-2*time.Hour))
	young := plantRaw(t, data, []byte(`{"young":1}`), time.Now())

	out, err := execute(t, "gc", "--dry-run", "--data", data)
	require.NoError(t, err)
	assert.Equal(t, "2 objects, 0 indexed, 2 without an index row (1 younger than 1h0m0s), 0 removed\n", out)
	assert.FileExists(t, old)

	out, err = execute(t, "--data", data, "gc")
	require.NoError(t, err)
	assert.Equal(t, "2 objects, 0 indexed, 2 without an index row (1 younger than 1h0m0s), 1 removed\n", out)
	assert.NoFileExists(t, old)
	assert.FileExists(t, young)

	out, err = execute(t, "--data", data, "gc", "--min-age", "0s")
	require.NoError(t, err)
	assert.Equal(t, "1 objects, 0 indexed, 1 without an index row (0 younger than 0s), 1 removed\n", out)
	assert.NoFileExists(t, young)

	_, err = execute(t, "--data", data, "gc", "--min-age", "-1s")
	assert.True(t, errors.Is(err, cmdutil.ErrUsage), "%v", err)
}

// TestAdminAddCLI: admin add prints a fresh token once per name; a bad
// name is a usage error that touches no store.
func TestAdminAddCLI(t *testing.T) {
	data := t.TempDir()
	tok := regexp.MustCompile(`^\S{20,}\n$`)
	a, err := execute(t, "--data", data, "admin", "add", "ops")
	require.NoError(t, err)
	assert.Regexp(t, tok, a)
	b, err := execute(t, "admin", "add", "ops2", "--data", data)
	require.NoError(t, err)
	assert.Regexp(t, tok, b)
	assert.NotEqual(t, a, b)
	assert.FileExists(t, filepath.Join(data, "collect.db"))

	empty := filepath.Join(t.TempDir(), "none")
	_, err = execute(t, "--data", empty, "admin", "add", "bad name")
	assert.True(t, errors.Is(err, cmdutil.ErrUsage), "%v", err)
	assert.NoDirExists(t, empty)
}
