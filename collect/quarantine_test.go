package collect_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect/store"
)

func allRollups(t *testing.T, st store.Store) map[store.RollupKey]store.Rollup {
	t.Helper()
	got := map[store.RollupKey]store.Rollup{}
	for _, w := range []time.Duration{store.Day, store.Hour} {
		require.NoError(t, st.Rollups(context.Background(), store.RollupFilter{Width: w}, func(r store.Rollup) error {
			got[r.RollupKey] = r
			return nil
		}))
	}
	return got
}

// TestQuarantineRollsUpAgain: Server.Quarantine (what `collect run
// quarantine` calls) takes the run out of the roll-ups at once: the fleet
// views' rows equal a full reindex's, which never reads the quarantined
// run, and its figures (a planted 7 ms RTT and one run) are gone.
func TestQuarantineRollsUpAgain(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	var ids []string
	for i := range 3 {
		id := uuid.NewString()
		body := derivableSurvey(t, id)
		if i == 1 {
			body = strings.Replace(body, `"rtts_ms":[1]`, `"rtts_ms":[7]`, 1)
		}
		require.Equal(t, 201, e.put(t, id, []byte(body), e.probeTok, "").code)
		ids = append(ids, id)
	}
	require.Eventually(t, func() bool {
		und, err := e.st.ListUnderived(ctx, 0)
		return err == nil && len(und) == 0
	}, 10*time.Second, 20*time.Millisecond)
	runs := func(rows map[store.RollupKey]store.Rollup) (n int64, rtt7 bool) {
		for k, r := range rows {
			if k.Width == store.Day && k.Cell == store.RunCell {
				n += r.Runs
			}
			if s := r.Sketches[store.MetricRTT]; s != nil && s.Quantile(1) > 5 {
				rtt7 = true
			}
		}
		return n, rtt7
	}
	n, rtt7 := runs(allRollups(t, e.st))
	require.Equal(t, int64(3), n)
	require.True(t, rtt7)

	require.NoError(t, e.srv.Quarantine(ctx, ids[1], "test"))
	after := allRollups(t, e.st)
	n, rtt7 = runs(after)
	assert.Equal(t, int64(2), n, "one run fewer")
	assert.False(t, rtt7, "the quarantined run's RTT is gone")
	_, err := e.srv.ReindexAll(ctx)
	require.NoError(t, err)
	assert.Equal(t, allRollups(t, e.st), after, "equal to a reindex without the run")
}
