package collect

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect/store"
)

// TestReportBusy: past maxReports exact builds (or fleetBuilds fleet
// views) at once, GET /v1/report answers 429 with Retry-After; a slot
// freed, 200 again.
func TestReportBusy(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "collect.db"))
	require.NoError(t, err)
	defer st.Close()
	tok := NewToken()
	require.NoError(t, st.AddAdmin(ctx, "ops", HashToken(tok), time.Now()))
	s, err := New(Config{Store: st, Data: dir, Limits: DefaultLimits()})
	require.NoError(t, err)
	get := func(q string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/v1/report"+q, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, req)
		return w
	}
	for range maxReports {
		s.reports <- struct{}{}
	}
	day := "?since=2026-11-22&until=2026-11-23" // one day: the exact report
	w := get(day)
	assert.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, "5", w.Header().Get("Retry-After"))
	<-s.reports
	assert.Equal(t, http.StatusOK, get(day).Code)

	_, sem := s.fleet.get("", time.Now())
	for range fleetBuilds {
		sem <- struct{}{}
	}
	w = get("?since=7d") // the fleet's week: the roll-ups
	assert.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, "5", w.Header().Get("Retry-After"))
	<-sem
	assert.Equal(t, http.StatusOK, get("?since=7d").Code)
}
