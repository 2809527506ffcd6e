package collect_test

import (
	"context"
	"errors"
	"net/http"
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
	ctx := context.Background()
	for range 3 {
		id := uuid.NewString()
		require.Equal(t, http.StatusCreated, e.put(t, id, stream(t, id, "pi1"), e.probeTok, "").code)
	}
	underived := func() int {
		rs, err := dd.Store.ListUnderived(ctx, 0)
		require.NoError(t, err)
		return len(rs)
	}
	health := func() string { return string(e.get(t, "/healthz", "").body) }
	require.Eventually(t, func() bool { return underived() == 3 && strings.Contains(health(), `"derive_backlog":"3"`) },
		30*time.Second, 10*time.Millisecond, "the backlog is shown")
	m := e.get(t, "/metrics", e.adminTok)
	assert.Contains(t, string(m.body), "mptester_collect_derive_backlog 3")
	dd.down.Store(false)
	require.Eventually(t, func() bool { return underived() == 0 }, 30*time.Second, 10*time.Millisecond, "healed without a restart")
	require.Eventually(t, func() bool { return strings.Contains(health(), `"derive_backlog":"0"`) }, 30*time.Second, 10*time.Millisecond)
}
