package collect_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// FuzzAcceptedRenders: whatever records a survey document carries, an
// upload the collector acknowledges renders in /v1/report (JSON and
// HTML, the code report --db runs) with nothing skipped: ingest refuses
// what a reader cannot read.
func FuzzAcceptedRenders(f *testing.F) {
	for _, seed := range []string{`[]`, `[{"type":"dns","path":"wlan0","name":"a.example","rcode":"NOERROR","ms":12.5}]`,
		`[{"type":"probe","address":"198.18.9.1"}]`,
		`[{"type":"probe","probe_path":"wlan0","address":"198.18.9.1","valid":true,"responsive":true,"rtt_ms":[1,2]}]`,
		`[{"type":"resolution","path":"wlan0","domain":"a.example","status":"NOERROR","answers":["198.18.9.1"]}]`,
		`[{"type":"resolution","path":"wlan0","domain":"a.example","status":"NOERROR","answers":"not-a-list"}]`,
		`[{"type":"summary","cells":[{"probe_path":"wlan0","resolve_path":"wlan0","targets":1}]}]`,
		`[{"type":"pattern_test","index":0,"config":{"pattern":"ping","transport":"tcp","path":"wlan0"},"status":"ok"}]`,
		`[{"type":"x","v":"\u001b]52;c;aGk=\u0007"}]`} {
		f.Add(seed)
	}
	e := newEnv(f, nil)
	h := e.srv.Handler()
	f.Fuzz(func(t *testing.T, recs string) {
		id := uuid.NewString()
		body := withRecords(t, id, recs, nil)
		req := httptest.NewRequest(http.MethodPut, "/v1/runs/"+id, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+e.probeTok)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("upload answered %d: %s", rec.Code, rec.Body)
		}
		if rec.Code >= 300 {
			return // refused: nothing stored
		}
		for _, format := range []string{"json", "html"} {
			// One probe: the exact report, every run through every section.
			req := httptest.NewRequest(http.MethodGet, "/v1/report?probe=pi1&format="+format, nil)
			req.Header.Set("Authorization", "Bearer "+e.adminTok)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				t.Fatalf("records %q acknowledged, then /v1/report?format=%s answered %d: %s", recs, format, rec.Code, rec.Body)
			}
			if format == "json" {
				if sk := provenance(t, rec.Body.Bytes())["skipped"]; sk != "0" {
					t.Fatalf("records %q acknowledged, then skipped by the report: %s", recs, sk)
				}
			}
			if format == "html" && !strings.Contains(rec.Body.String(), id) {
				t.Fatalf("run %s missing from the report", id)
			}
		}
	})
}
