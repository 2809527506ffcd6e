package patterns

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// The bulk endpoint serves byte ranges as MPHTTP (003 §4.2-4.3) needs,
// over HTTP/1.1 and HTTP/2: 206 with Content-Range and the exact bytes of
// the whole object at that offset, 416 when unsatisfiable, and the same
// strong ETag and Last-Modified on every answer for a size.
func TestBulkRanges(t *testing.T) {
	m := &Mux{HTTP: http.NewServeMux(), Limits: DefaultLimits(), Logger: slog.New(slog.DiscardHandler)}
	bulkPattern{}.Register(m)
	h1 := httptest.NewServer(m.HTTP)
	defer h1.Close()
	h2 := httptest.NewUnstartedServer(m.HTTP)
	h2.EnableHTTP2 = true
	h2.StartTLS()
	defer h2.Close()

	const size = 3<<20 + 12345
	whole := make([]byte, size)
	if _, err := io.ReadFull(NewBulkBody(size), whole); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(whole[:bulkPeriod], whole[1<<20:1<<20+bulkPeriod]) {
		t.Fatal("content repeats at a power-of-two offset")
	}
	for _, tc := range []struct {
		srv   *httptest.Server
		proto string
	}{{h1, "HTTP/1.1"}, {h2, "HTTP/2.0"}} {
		t.Run(tc.proto, func(t *testing.T) {
			url := tc.srv.URL + "/bulk/" + strconv.Itoa(size) + "/x"
			get := func(rng string) (*http.Response, []byte) {
				t.Helper()
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				if rng != "" {
					req.Header.Set("Range", rng)
				}
				resp, err := tc.srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				if resp.Proto != tc.proto {
					t.Fatalf("proto %s, want %s", resp.Proto, tc.proto)
				}
				return resp, b
			}
			full, body := get("")
			if full.StatusCode != http.StatusOK || !bytes.Equal(body, whole) {
				t.Fatalf("whole object: status %d, %d bytes, equal %v", full.StatusCode, len(body), bytes.Equal(body, whole))
			}
			etag, lm := full.Header.Get("ETag"), full.Header.Get("Last-Modified")
			if etag != BulkETag(size) || lm != bulkModTime.Format(http.TimeFormat) {
				t.Fatalf("validators %q %q", etag, lm)
			}
			for _, r := range []struct {
				spec       string
				first, end int64 // [first, end)
			}{
				{"bytes=0-0", 0, 1},
				{"bytes=1000-2000", 1000, 2001},
				{"bytes=1048570-2097160", 1048570, 2097161},
				{"bytes=" + strconv.Itoa(size-10) + "-", size - 10, size},
				{"bytes=-100", size - 100, size},
				{"bytes=3000000-99999999", 3000000, size}, // end clamped to the size
			} {
				resp, b := get(r.spec)
				want := "bytes " + strconv.FormatInt(r.first, 10) + "-" + strconv.FormatInt(r.end-1, 10) + "/" + strconv.Itoa(size)
				if resp.StatusCode != http.StatusPartialContent || resp.Header.Get("Content-Range") != want {
					t.Errorf("%s: status %d Content-Range %q, want 206 %q", r.spec, resp.StatusCode, resp.Header.Get("Content-Range"), want)
				}
				if !bytes.Equal(b, whole[r.first:r.end]) {
					t.Errorf("%s: %d bytes differ from the object's", r.spec, len(b))
				}
				if resp.Header.Get("ETag") != etag || resp.Header.Get("Last-Modified") != lm {
					t.Errorf("%s: validators changed: %q %q", r.spec, resp.Header.Get("ETag"), resp.Header.Get("Last-Modified"))
				}
			}
			for _, spec := range []string{"bytes=" + strconv.Itoa(size) + "-", "bytes=99999999-100000000"} {
				if resp, _ := get(spec); resp.StatusCode != http.StatusRequestedRangeNotSatisfiable || resp.Header.Get("Content-Range") != "bytes */"+strconv.Itoa(size) {
					t.Errorf("%s: status %d Content-Range %q, want 416 bytes */%d", spec, resp.StatusCode, resp.Header.Get("Content-Range"), size)
				}
			}
		})
	}
	if BulkETag(size) == BulkETag(size+1) {
		t.Error("two sizes share an ETag")
	}
}
