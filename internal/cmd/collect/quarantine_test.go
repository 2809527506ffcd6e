package collect

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/internal/cmdutil"
)

// TestRunQuarantine: `collect run quarantine` hides a stored run from the
// lists (the store suite checks exports and the deriver); an unknown run
// is a usage error.
func TestRunQuarantine(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(data, "collect.db"))
	require.NoError(t, err)
	require.NoError(t, st.AddProbe(ctx, "pi1", "h", time.Now()))
	_, _, err = st.PutRun(ctx, store.Run{RunID: "r1", ProbeID: "pi1", Command: "survey", Parsed: true, SHA256: "x",
		RawPath: store.RawInline, Raw: []byte("{}"), StoredAt: time.Now()}, store.Report{})
	require.NoError(t, err)
	require.NoError(t, st.Close())

	_, err = execute(t, "--data", data, "run", "quarantine", "nope")
	assert.ErrorIs(t, err, cmdutil.ErrUsage)
	out, err := execute(t, "--data", data, "run", "quarantine", "r1", "--reason", "unreadable")
	require.NoError(t, err)
	assert.Equal(t, "quarantined r1\n", out)

	st, err = store.Open(ctx, filepath.Join(data, "collect.db"))
	require.NoError(t, err)
	defer st.Close()
	runs, err := st.ListRuns(ctx, store.RunFilter{})
	require.NoError(t, err)
	assert.Empty(t, runs)
}

// TestExportWarnsUnderived: an export over runs whose derived rows are
// not written yet says so (stderr), and fails with --strict (exit 3).
func TestExportWarnsUnderived(t *testing.T) {
	ctx := context.Background()
	data, out := t.TempDir(), filepath.Join(t.TempDir(), "pq")
	st, err := store.Open(ctx, filepath.Join(data, "collect.db"))
	require.NoError(t, err)
	require.NoError(t, st.AddProbe(ctx, "pi1", "h", time.Now()))
	_, _, err = st.PutRun(ctx, store.Run{RunID: "r1", ProbeID: "pi1", Command: "survey", Parsed: true, SHA256: "x",
		RawPath: store.RawInline, Raw: []byte("{}"), StartedAt: time.Now(), StoredAt: time.Now()}, store.Report{})
	require.NoError(t, err)
	require.NoError(t, st.Close())

	io, _, errOut := cmdutil.Test()
	cmd := NewCmdCollect(&cmdutil.Factory{IO: io, Logger: slog.New(slog.DiscardHandler)}, nil)
	cmd.SetArgs([]string{"--data", data, "export", "-o", out})
	cmd.SetContext(ctx)
	require.NoError(t, cmd.Execute())
	assert.Contains(t, errOut.String(), "1 runs in range have no derived rows")
	_, err = execute(t, "--data", data, "export", "-o", out, "--strict")
	assert.ErrorIs(t, err, cmdutil.ErrPartial)
	_, err = execute(t, "--data", data, "export", "-o", out, "--strict", "--probe", "pi2")
	assert.NoError(t, err, "out of range")
}

// TestAdminRevoke: collect admin revoke ends the admin's tokens; an
// unknown admin is a usage error; probe revoke never touches an admin.
func TestAdminRevoke(t *testing.T) {
	data := t.TempDir()
	_, err := execute(t, "--data", data, "admin", "add", "ops")
	require.NoError(t, err)
	_, err = execute(t, "--data", data, "probe", "revoke", "ops")
	assert.ErrorIs(t, err, cmdutil.ErrUsage, "no probe ops: the admin is another namespace")
	out, err := execute(t, "--data", data, "admin", "revoke", "ops")
	require.NoError(t, err)
	assert.Equal(t, "revoked admin ops\n", out)
	_, err = execute(t, "--data", data, "admin", "revoke", "ops")
	assert.ErrorIs(t, err, cmdutil.ErrUsage)
}
