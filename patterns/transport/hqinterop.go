package transport

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/mptester/mptester/mpquic"
)

// alpnHQ is the QUIC interop runner's HTTP/0.9 ("hq-interop"), which the
// mpquic listener also answers, so that the runner's clients (and
// mpquic/interop's) can fetch from `mptester serve`: a request is
// "GET /path\r\n" on a bidirectional stream, the response is the body,
// then FIN. HTTP/0.9 has no status: a request the handler does not
// answer with 2xx is reset.
const alpnHQ = "hq-interop"

// hqResetCode resets a stream whose request failed (hq-interop defines no
// codes; 0 is what its implementations use).
const hqResetCode = 0

func serveHQ(ctx context.Context, c *mpquic.Conn, h http.Handler, readTimeout time.Duration) {
	for {
		st, err := c.AcceptStream(ctx)
		if err != nil {
			return
		}
		go serveHQStream(c, st, h, readTimeout)
	}
}

func serveHQStream(c *mpquic.Conn, st *mpquic.Stream, h http.Handler, readTimeout time.Duration) {
	fail := func() {
		st.CancelRead(hqResetCode)
		st.CancelWrite(hqResetCode)
	}
	if readTimeout > 0 {
		st.SetReadDeadline(time.Now().Add(readTimeout))
	}
	line, err := bufio.NewReader(io.LimitReader(st, 4096)).ReadString('\n')
	path, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "GET ")
	if (err != nil && err != io.EOF) || !ok || !strings.HasPrefix(path, "/") {
		fail()
		return
	}
	req, err := http.NewRequest(http.MethodGet, "https://"+c.ConnectionState().ServerName+path, nil)
	if err != nil {
		fail()
		return
	}
	state := c.ConnectionState()
	req.RemoteAddr, req.TLS, req.RequestURI, req.Proto, req.ProtoMajor, req.ProtoMinor = c.RemoteAddr().String(), &state, path, "HTTP/0.9", 0, 9
	w := &hqWriter{st: st, header: http.Header{}}
	h.ServeHTTP(w, req)
	if w.status != 0 && (w.status < 200 || w.status > 299) {
		fail()
		return
	}
	st.Close()
}

// hqWriter is the body of an HTTP/0.9 response: headers are dropped.
type hqWriter struct {
	st     *mpquic.Stream
	header http.Header
	status int
}

func (w *hqWriter) Header() http.Header { return w.header }

func (w *hqWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *hqWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if w.status < 200 || w.status > 299 {
		return len(p), nil
	}
	return w.st.Write(p)
}
