package collect

import (
	"context"
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
