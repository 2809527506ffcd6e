package collect_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/uuid"

	"github.com/mptester/mptester/collect"
)

// BenchmarkHandlerDocument is the server's own cost per pattern-run
// envelope (validation, tmp file, fsyncs, index), without network or TLS;
// the end-to-end figures are collect/e2e's BenchmarkIngest*.
func BenchmarkHandlerDocument(b *testing.B) {
	// 100 parallel uploads of one probe: past the per-probe bound (429)
	// unless it is raised.
	e := newEnv(b, func(l *collect.Limits) { l.MaxPerProbe, l.MaxInFlight = 200, 200 })
	base := fixture(b, "document.json", fixtureRunID, "pi1", 0)
	h := e.srv.Handler()
	b.SetParallelism(100)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := uuid.NewString()
			req := httptest.NewRequest(http.MethodPut, "/v1/runs/"+id, bytes.NewReader(bytes.ReplaceAll(base, []byte(fixtureRunID), []byte(id))))
			req.Header.Set("Authorization", "Bearer "+e.probeTok)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusCreated {
				b.Fatalf("%d %s", rec.Code, rec.Body)
			}
		}
	})
}
