package collect_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect"
)

// TestReportEndpoint: GET /v1/report serves the report page built from the
// store: a probe's token sees its own runs only, an admin the fleet or
// any probe; every refusal has its status.
func TestReportEndpoint(t *testing.T) {
	e := newEnv(t, nil)
	tok2 := collect.NewToken()
	require.NoError(t, e.st.AddProbe(context.Background(), "pi2", collect.HashToken(tok2), time.Now()))
	id1, id2 := uuid.NewString(), uuid.NewString()
	require.Equal(t, http.StatusCreated, e.put(t, id1, stream(t, id1, "pi1"), e.probeTok, "").code)
	require.Equal(t, http.StatusCreated, e.put(t, id2, stream(t, id2, "pi2"), tok2, "").code)

	for _, tc := range []struct {
		name, query, tok string
		code             int
		has, hasNot      []string
	}{
		{"no token", "", "", http.StatusUnauthorized, nil, nil},
		{"unknown token", "", "nope", http.StatusUnauthorized, nil, nil},
		{"probe: its own runs", "", e.probeTok, http.StatusOK, []string{id1, "probe=pi1", "<svg"}, []string{id2}},
		{"probe names itself", "?probe=pi1", e.probeTok, http.StatusOK, []string{id1}, []string{id2}},
		{"probe asks for another", "?probe=pi2", e.probeTok, http.StatusForbidden, nil, nil},
		{"admin: one day of the fleet, exact", "?since=2026-11-22&until=2026-11-23", e.adminTok, http.StatusOK, []string{id1, id2, "fleet-runs"}, nil},
		{"admin: the fleet over a week, from the roll-ups", "?since=2026-11-20&until=2026-11-27", e.adminTok, http.StatusOK,
			[]string{"fleet-buckets", "since=2026-11-20T00:00:00Z", "roll-ups"}, []string{id1, id2}},
		{"admin: the fleet over 7d back", "?since=7d", e.adminTok, http.StatusOK, []string{"fleet-buckets"}, []string{id1, id2}},
		{"admin: one probe", "?probe=pi2", e.adminTok, http.StatusOK, []string{id2, "probe=pi2"}, []string{id1}},
		{"admin: a window with nothing", "?since=2030-01-01&until=2030-01-02", e.adminTok, http.StatusOK, []string{"since=2030-01-01T00:00:00Z"}, []string{id1, id2}},
		{"future since", "?since=2030-01-01", e.adminTok, http.StatusBadRequest, []string{"until must be after since"}, nil},
		{"bad since", "?since=yesterday", e.adminTok, http.StatusBadRequest, []string{"since"}, nil},
		{"until before since", "?since=2026-11-02&until=2026-11-01", e.adminTok, http.StatusBadRequest, nil, nil},
		{"bad type", "?type=mobile", e.adminTok, http.StatusBadRequest, []string{"type"}, nil},
		{"bad format", "?format=pdf", e.adminTok, http.StatusBadRequest, nil, nil},
		{"unknown parameter", "?probes=pi1", e.adminTok, http.StatusBadRequest, []string{"probes"}, nil},
	} {
		a := e.get(t, "/v1/report"+tc.query, tc.tok)
		require.Equal(t, tc.code, a.code, "%s: %s", tc.name, a.body)
		for _, s := range tc.has {
			assert.Contains(t, string(a.body), s, tc.name)
		}
		for _, s := range tc.hasNot {
			assert.NotContains(t, string(a.body), s, tc.name)
		}
		if tc.code == http.StatusOK {
			assert.Equal(t, "text/html; charset=utf-8", a.hdr.Get("Content-Type"), tc.name)
			assert.True(t, strings.HasPrefix(string(a.body), "<!DOCTYPE html>"), tc.name)
		} else {
			assert.Equal(t, "application/json", a.hdr.Get("Content-Type"), tc.name)
		}
	}
	a := e.get(t, "/v1/report?format=json&since=2026-11-22&until=2026-11-23", e.adminTok)
	require.Equal(t, http.StatusOK, a.code)
	var rep struct {
		Tables []struct {
			Name string     `json:"name"`
			Rows [][]string `json:"rows"`
		} `json:"tables"`
	}
	require.NoError(t, json.Unmarshal(a.body, &rep))
	var inputs [][]string
	for _, tb := range rep.Tables {
		if tb.Name == "inputs" {
			inputs = tb.Rows
		}
	}
	assert.Len(t, inputs, 2, "both runs read")
	req, err := http.NewRequest(http.MethodPost, e.url+"/v1/report", nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusMethodNotAllowed, do(t, req).code)
}
