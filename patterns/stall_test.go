package patterns

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// An HTTP pattern's GET whose body stops after 1,000 of its 4 MiB ends
// after the stall timeout with a *StallError at byte 1000, classified as
// a timeout; a body that trickles a byte every 50 ms is progress.
func TestGetStallTimeout(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stall", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "4194304")
		_, _ = w.Write(make([]byte, 1000))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	mux.HandleFunc("GET /trickle", func(w http.ResponseWriter, r *http.Request) {
		for range 10 {
			_, _ = w.Write([]byte{'x'})
			w.(http.Flusher).Flush()
			time.Sleep(50 * time.Millisecond)
		}
	})
	mux.HandleFunc("GET /silent", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	_, _, n, _, err := get(ctx, http.DefaultTransport, srv.URL+"/stall", 300*time.Millisecond)
	var se *StallError
	if !errors.As(err, &se) || se.At != 1000 || n != 1000 || ctx.Err() != nil {
		t.Fatalf("stalled body: %d bytes, %v", n, err)
	}
	if !strings.Contains(err.Error(), srv.URL+"/stall") || !strings.Contains(err.Error(), "stalled at byte 1000") {
		t.Errorf("error %q", err)
	}
	if st := Classify(ctx, err); st != StatusTimeout {
		t.Errorf("classified %v", st)
	}
	// No header at all is a stall too.
	if _, _, _, _, err := get(ctx, http.DefaultTransport, srv.URL+"/silent", 300*time.Millisecond); !errors.As(err, &se) || se.At != 0 {
		t.Fatalf("silent server: %v", err)
	}
	if _, _, n, _, err := get(ctx, http.DefaultTransport, srv.URL+"/trickle", 300*time.Millisecond); err != nil || n != 10 {
		t.Fatalf("trickle: %d bytes, %v", n, err)
	}
}
