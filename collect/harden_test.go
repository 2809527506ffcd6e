package collect_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect"
)

// rawPut sends an upload's request line and headers by hand, declaring
// length body bytes, and returns the connection for the body.
func (e *env) rawPut(t *testing.T, id, tok string, length int) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "PUT /v1/runs/%s HTTP/1.1\r\nHost: collect\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n", id, tok, length)
	return conn
}

// answerOf reads the server's answer on conn and checks that the server
// then closes it; guard bounds the wait (a hang fails the test).
func answerOf(t *testing.T, conn net.Conn, guard time.Duration) (int, string) {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(guard)))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err, "no answer within %s", guard)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	_, err = br.ReadByte()
	assert.ErrorIs(t, err, io.EOF, "the server closes the connection")
	return resp.StatusCode, string(b)
}

// TestSlowBodyCut: a body trickling below MinRate, and one that stops,
// are answered 408 and their connections closed; the slot is free again.
func TestSlowBodyCut(t *testing.T) {
	e := newEnv(t, func(l *collect.Limits) {
		l.MinRate, l.RateWindow, l.MaxInFlight = 4096, 300*time.Millisecond, 2
	})
	body := stream(t, uuid.NewString(), "pi1")
	trickle := e.rawPut(t, uuid.NewString(), e.probeTok, 100000)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				if _, err := trickle.Write(body[i%len(body) : i%len(body)+1]); err != nil {
					return
				}
			}
		}
	}()
	silent := e.rawPut(t, uuid.NewString(), e.probeTok, 100000)
	silent.Write(body[:10])
	for _, c := range []net.Conn{trickle, silent} {
		code, answer := answerOf(t, c, 20*time.Second)
		assert.Equal(t, http.StatusRequestTimeout, code, answer)
		assert.Contains(t, answer, "slower than 4096 bytes/s")
	}
	id := uuid.NewString()
	a := e.put(t, id, stream(t, id, "pi1"), e.probeTok, "")
	assert.Equal(t, http.StatusCreated, a.code, "%s", a.body)
}

// TestSlowUploadDeadline: a body that keeps the rate but not
// MaxUploadTime is cut too.
func TestSlowUploadDeadline(t *testing.T) {
	e := newEnv(t, func(l *collect.Limits) {
		l.MinRate, l.RateWindow, l.MaxUploadTime = 1, time.Minute, 300*time.Millisecond
	})
	c := e.rawPut(t, uuid.NewString(), e.probeTok, 1000)
	c.Write([]byte(`{"type":"header"`))
	code, answer := answerOf(t, c, 20*time.Second)
	assert.Equal(t, http.StatusRequestTimeout, code, answer)
}

// TestPerProbeInFlight: one probe holds at most MaxPerProbe uploads; past
// them it gets 429 while another probe still uploads.
func TestPerProbeInFlight(t *testing.T) {
	e := newEnv(t, func(l *collect.Limits) { l.MaxPerProbe, l.MaxInFlight = 2, 8 })
	tok2 := collect.NewToken()
	require.NoError(t, e.st.AddProbe(context.Background(), "pi2", collect.HashToken(tok2), time.Now()))
	id := uuid.NewString()
	body := stream(t, id, "pi1")
	held := []net.Conn{e.rawPut(t, id, e.probeTok, len(body)), e.rawPut(t, uuid.NewString(), e.probeTok, len(body))}
	for _, c := range held {
		c.Write(body[:100])
	}
	require.Eventually(t, func() bool {
		return strings.Contains(string(e.get(t, "/metrics", e.adminTok).body), "mptester_collect_uploads_in_flight 2")
	}, 5*time.Second, 10*time.Millisecond)
	a := e.put(t, uuid.NewString(), body, e.probeTok, "")
	assert.Equal(t, http.StatusTooManyRequests, a.code, "%s", a.body)
	assert.Contains(t, string(a.body), "this probe has 2 uploads in flight")
	assert.NotEmpty(t, a.hdr.Get("Retry-After"))
	id2 := uuid.NewString()
	a = e.put(t, id2, stream(t, id2, "pi2"), tok2, "")
	assert.Equal(t, http.StatusCreated, a.code, "another probe is not held up: %s", a.body)
	held[0].Write(body[100:])
	code, _ := readAnswer(t, held[0])
	assert.Equal(t, http.StatusCreated, code)
}

func readAnswer(t *testing.T, c net.Conn) (int, string) {
	require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

// zstdFrame is a zstd frame by hand: a window of 2^windowLog bytes and n
// RLE blocks of 128 KiB each (a bomb of n×128 KiB in 4n bytes).
func zstdFrame(windowLog uint, n int) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0xFD2FB528)
	b = append(b, 0x00, byte((windowLog-10)<<3)) // no content size, not single segment; window descriptor
	for i := range n {
		last := uint32(0)
		if i == n-1 {
			last = 1
		}
		h := last | 1<<1 | (128<<10)<<3 // RLE block of 128 KiB
		b = append(b, byte(h), byte(h>>8), byte(h>>16), ' ')
	}
	return b
}

// TestCompressedOverLimitsIs413: a zstd window beyond the collector's, and
// a bomb that inflates past MaxBytes, are 413 with the reason, never 500;
// a corrupt frame is 400.
func TestCompressedOverLimitsIs413(t *testing.T) {
	e := newEnv(t, func(l *collect.Limits) { l.MaxBytes = 16 << 20 })
	bad := zs(stream(t, uuid.NewString(), "pi1"))
	bad[len(bad)-1] ^= 0xff // the checksum
	for _, c := range []struct {
		name string
		body []byte
		code int
		want string
	}{
		{"window 128 MiB", zstdFrame(27, 8192), http.StatusRequestEntityTooLarge, "windows up to 8388608 bytes"},
		{"bomb, 8 MiB window", zstdFrame(23, 8192), http.StatusRequestEntityTooLarge, "size limit"},
		{"corrupt", bad, http.StatusBadRequest, "does not decompress"},
	} {
		a := e.put(t, uuid.NewString(), c.body, e.probeTok, "zstd")
		assert.Equal(t, c.code, a.code, "%s: %s", c.name, a.body)
		assert.Contains(t, string(a.body), c.want, c.name)
	}
}

// bigDocument is the test document with its records repeated to about
// size bytes; bad, when >= 0, breaks that record.
func bigDocument(t testing.TB, id string, size, bad int) []byte {
	var doc map[string]any
	require.NoError(t, json.Unmarshal(fixture(t, "document.json", id, "pi1", 0), &doc))
	recs := doc["records"].([]any)
	var out []any
	for n := 0; n*60 < size; n++ {
		r := recs[n%len(recs)]
		if n == bad {
			r = map[string]any{"no_type": true}
		}
		out = append(out, r)
	}
	// The header's fields first, records last, as mptester writes it
	// (a reader streams the records once it knows the header).
	delete(doc, "records")
	head, err := json.Marshal(doc)
	require.NoError(t, err)
	rb, err := json.Marshal(out)
	require.NoError(t, err)
	return append(append(append(head[:len(head)-1], `,"records":`...), rb...), '}')
}

// TestLargeDocumentStreamed: a multi-megabyte document is validated (its
// records one by one) and stored; a bad record deep inside is named.
func TestLargeDocumentStreamed(t *testing.T) {
	e := newEnv(t, nil)
	id := uuid.NewString()
	doc := bigDocument(t, id, 3<<20, -1)
	a := e.put(t, id, doc, e.probeTok, "")
	require.Equal(t, http.StatusCreated, a.code, "%s", a.body)
	assert.Equal(t, doc, e.get(t, "/v1/runs/"+id, e.adminTok).body)
	id = uuid.NewString()
	a = e.put(t, id, bigDocument(t, id, 3<<20, 40000), e.probeTok, "")
	assert.Equal(t, http.StatusBadRequest, a.code)
	assert.Contains(t, string(a.body), `"/records/40000`)
	_ = bytes.MinRead
}

// TestBearerCaseInsensitive: the scheme name is case-insensitive (RFC
// 9110, section 11.1).
func TestBearerCaseInsensitive(t *testing.T) {
	e := newEnv(t, nil)
	for _, scheme := range []string{"bearer", "BEARER", "Bearer "} {
		id := uuid.NewString()
		req, err := http.NewRequest(http.MethodPut, e.url+"/v1/runs/"+id, bytes.NewReader(stream(t, id, "pi1")))
		require.NoError(t, err)
		req.Header.Set("Authorization", scheme+" "+e.probeTok)
		a := do(t, req)
		assert.Equal(t, http.StatusCreated, a.code, "%q: %s", scheme, a.body)
	}
	req, _ := http.NewRequest(http.MethodGet, e.url+"/v1/runs", nil)
	req.Header.Set("Authorization", "Basic "+e.adminTok)
	assert.Equal(t, http.StatusUnauthorized, do(t, req).code, "another scheme")
}

// TestErrorBodiesNameNoPaths: a storage failure is answered 5xx without
// the server's file names (they go to the log).
func TestErrorBodiesNameNoPaths(t *testing.T) {
	e := newEnv(t, nil)
	id := uuid.NewString()
	// A file where the run's raw directory belongs: the upload cannot be
	// written.
	require.NoError(t, os.WriteFile(filepath.Join(e.data, "raw", id[:2]), nil, 0o600))
	a := e.put(t, id, bigDocument(t, id, 300<<10, -1), e.probeTok, "")
	assert.Equal(t, http.StatusServiceUnavailable, a.code, "a store failing is an outage (retry later): %s", a.body)
	assert.NotContains(t, string(a.body), e.data)
	assert.NotContains(t, string(a.body), "/raw/")
}

// TestRefusedBodyNotRead: an upload refused before its body is read (429
// past the probe's slots, 401 without a valid token) is answered and its
// connection closed at once, not after the server has read what is left
// of the body at the client's pace.
func TestRefusedBodyNotRead(t *testing.T) {
	e := newEnv(t, func(l *collect.Limits) { l.MaxPerProbe = 1 })
	body := stream(t, uuid.NewString(), "pi1")
	held := e.rawPut(t, uuid.NewString(), e.probeTok, 100000)
	held.Write(body[:10])
	require.Eventually(t, func() bool {
		return strings.Contains(string(e.get(t, "/metrics", e.adminTok).body), "mptester_collect_uploads_in_flight 1")
	}, 5*time.Second, 10*time.Millisecond)
	for tok, want := range map[string]int{e.probeTok: http.StatusTooManyRequests, collect.NewToken(): http.StatusUnauthorized} {
		c := e.rawPut(t, uuid.NewString(), tok, 100000)
		c.Write(body[:10])
		code, answer := answerOf(t, c, 5*time.Second) // the body would take forever
		assert.Equal(t, want, code, answer)
	}
}

// TestZstdDecodersBounded: with MaxZstd decoders busy, another zstd upload
// waits for one (it is not decoded alongside) and then is stored.
func TestZstdDecodersBounded(t *testing.T) {
	e := newEnv(t, func(l *collect.Limits) { l.MaxZstd = 1 })
	id := uuid.NewString()
	z := zs(stream(t, id, "pi1"))
	held, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	require.NoError(t, err)
	defer held.Close()
	fmt.Fprintf(held, "PUT /v1/runs/%s HTTP/1.1\r\nHost: collect\r\nAuthorization: Bearer %s\r\nContent-Encoding: zstd\r\nContent-Length: %d\r\n\r\n", id, e.probeTok, len(z))
	held.Write(z[:10])
	require.Eventually(t, func() bool {
		return strings.Contains(string(e.get(t, "/metrics", e.adminTok).body), "mptester_collect_uploads_in_flight 1")
	}, 5*time.Second, 10*time.Millisecond)
	id2 := uuid.NewString()
	second := make(chan answer, 1)
	go func() { second <- e.put(t, id2, zs(stream(t, id2, "pi1")), e.probeTok, "zstd") }()
	select {
	case a := <-second:
		t.Fatalf("decoded beside the busy decoder: %d %s", a.code, a.body)
	case <-time.After(500 * time.Millisecond):
	}
	held.Write(z[10:])
	code, _ := readAnswer(t, held)
	assert.Equal(t, http.StatusCreated, code)
	a := <-second
	assert.Equal(t, http.StatusCreated, a.code, "%s", a.body)
}
