package collect_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/internal/pgtest"
)

// withRecords is the survey document fixture with its records replaced
// by recs (a JSON array), and edit applied to the header's text.
func withRecords(t testing.TB, id, recs string, edit func(string) string) []byte {
	s := string(fixture(t, "document.json", id, "pi1", 0))
	i := strings.Index(s, `"records":`)
	require.Positive(t, i)
	head := s[:i]
	if edit != nil {
		head = edit(head)
	}
	return []byte(head + `"records": ` + recs + "}\n")
}

type poison struct {
	name string
	doc  func(t testing.TB, id string) []byte
	// reader: the readers fail on it when it is stored (not only the
	// store refusing it).
	reader bool
	want   string // in the 400's reason or pointer
}

// poisons are documents an older collector acknowledged although they
// broke every fleet view, or answered 500 forever on PostgreSQL.
var poisons = []poison{
	{"probe record without probe_path", func(t testing.TB, id string) []byte {
		return withRecords(t, id, `[{"type":"probe","address":"198.18.9.1"}]`, nil)
	}, true, "probe_path"},
	{"answers not a list", func(t testing.TB, id string) []byte {
		return withRecords(t, id, `[{"type":"resolution","path":"wlan0","domain":"a.example","status":"NOERROR","answers":"not-a-list"}]`, nil)
	}, true, "records[0]"},
	{"65 paths in records", func(t testing.TB, id string) []byte {
		var recs []string
		for i := range 65 {
			recs = append(recs, fmt.Sprintf(`{"type":"resolution","path":"p%d","domain":"a.example","status":"NOERROR","answers":["198.18.9.1"]}`, i))
		}
		return withRecords(t, id, "["+strings.Join(recs, ",")+"]", nil)
	}, true, "64 paths"},
	{"65 paths in the header", func(t testing.TB, id string) []byte {
		var ps []string
		for i := range 65 {
			ps = append(ps, fmt.Sprintf(`{"name":"p%d","index":%d,"kind":"wifi","up":true}`, i, i+2))
		}
		return withRecords(t, id, `[]`, func(h string) string {
			a, b := strings.Index(h, `"paths": [`), strings.Index(h, `"config":`)
			return h[:a] + `"paths": [` + strings.Join(ps, ",") + "],\n  " + h[b:]
		})
	}, false, "/paths"},
	{"NUL in a path name", func(t testing.TB, id string) []byte {
		return withRecords(t, id, `[]`, func(h string) string { return strings.Replace(h, `"name": "wlan0"`, `"name": "wl\u0000an0"`, 1) })
	}, false, "/paths/0/name"},
	{"escape in a path name", func(t testing.TB, id string) []byte {
		return withRecords(t, id, `[]`, func(h string) string {
			return strings.Replace(h, `"name": "wlan0"`, `"name": "wl\u001b]52;c;aGk=\u0007"`, 1)
		})
	}, false, "/paths/0/name"},
	{"NUL in the host", func(t testing.TB, id string) []byte {
		return withRecords(t, id, `[]`, func(h string) string { return strings.Replace(h, `"kernel": "6.18.0"`, `"kernel": "6.18\u0000"`, 1) })
	}, false, "U+0000"},
	{"NUL in a record field", func(t testing.TB, id string) []byte {
		return withRecords(t, id, `[{"type":"dns","path":"wlan0","name":"a.\u0000example","rcode":"NOERROR","ms":1}]`, nil)
	}, false, "records[0]"},
}

// TestPoisonDocuments: every poison is refused 400 naming what is wrong,
// and the valid upload behind it is stored; one stored before this check
// (by an older collector) is skipped by /v1/report, which says so, and
// the fleet page (roll-ups) still answers; quarantining it hides it.
func TestPoisonDocuments(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		testPoison(t, filepath.Join(dir, "collect.db"), filepath.Join(dir, "data"))
	})
	t.Run("postgres", func(t *testing.T) {
		testPoison(t, pgtest.DSN(t), t.TempDir())
	})
}

func testPoison(t *testing.T, dsn, data string) {
	ctx := context.Background()
	e := newEnvDSN(t, dsn, data, func(*collect.Config) {})
	good := uuid.NewString()
	require.Equal(t, http.StatusCreated, e.put(t, good, withRecords(t, good, `[]`, nil), e.probeTok, "").code)
	var stored []string
	for _, p := range poisons {
		id := uuid.NewString()
		body := p.doc(t, id)
		a := e.put(t, id, body, e.probeTok, "")
		assert.Equal(t, http.StatusBadRequest, a.code, "%s: %s", p.name, a.body)
		assert.Contains(t, string(a.body), p.want, p.name)
		_, err := e.st.GetRun(ctx, id)
		assert.ErrorIs(t, err, store.ErrNotFound, "%s: nothing stored", p.name)
		if !p.reader {
			continue
		}
		// As an older collector stored it.
		_, _, err = e.st.PutRun(ctx, store.Run{RunID: id, ProbeID: "pi1", Command: "survey", SchemaVersion: "1.1", Status: "partial",
			Parsed: true, StartedAt: time.Now(), Records: 1, Bytes: int64(len(body)), SHA256: sha(body), RawPath: store.RawInline, Raw: body,
			ContentType: "application/json", StoredAt: time.Now()}, store.Report{Probe: "pi1", Seen: time.Now()})
		require.NoError(t, err)
		stored = append(stored, id)
	}
	// A valid result after the poisons is stored.
	after := uuid.NewString()
	require.Equal(t, http.StatusCreated, e.put(t, after, withRecords(t, after, `[]`, nil), e.probeTok, "").code)

	rep := e.get(t, "/v1/report?format=json&probe=pi1", e.adminTok) // the exact report: its runs
	require.Equal(t, http.StatusOK, rep.code, "%s", rep.body)
	skipped := provenance(t, rep.body)["skipped"]
	assert.True(t, strings.HasPrefix(skipped, fmt.Sprintf("%d: ", len(stored))), "%q", skipped)
	for _, id := range stored {
		assert.Contains(t, skipped, id)
	}
	assert.Contains(t, string(rep.body), good)
	assert.Contains(t, string(rep.body), after)
	fp := e.page(t, "/")
	require.Equal(t, http.StatusOK, fp.code, "%s", fp.body)

	for _, id := range stored {
		require.NoError(t, e.st.Quarantine(ctx, id, "poison", time.Now()))
	}
	rep = e.get(t, "/v1/report?format=json&probe=pi1", e.adminTok) // the exact report: its runs
	require.Equal(t, http.StatusOK, rep.code, "%s", rep.body)
	assert.Equal(t, "0", provenance(t, rep.body)["skipped"])
	for _, id := range stored {
		assert.NotContains(t, string(rep.body), id, "quarantined: hidden")
	}
	g := e.get(t, "/v1/runs/"+stored[0], e.adminTok)
	assert.Equal(t, http.StatusOK, g.code, "the raw upload is kept")
}

// provenance is the key/value table of a JSON report.
func provenance(t testing.TB, body []byte) map[string]string {
	var rep struct {
		Tables []struct {
			Name string     `json:"name"`
			Rows [][]string `json:"rows"`
		} `json:"tables"`
	}
	require.NoError(t, json.Unmarshal(body, &rep))
	out := map[string]string{}
	for _, tb := range rep.Tables {
		if tb.Name == "provenance" {
			for _, r := range tb.Rows {
				out[r[0]] = r[1]
			}
		}
	}
	return out
}
