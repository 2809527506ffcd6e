package h3

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mptester/mptester/mpquic"
)

// Server answers HTTP/3 requests on mpquic connections.
type Server struct {
	Handler http.Handler
	// MaxFieldSection bounds a request's decoded header section; default
	// 64 KiB.
	MaxFieldSection int
	// ReadHeaderTimeout bounds reading a request's HEADERS frame from its
	// stream's opening; 0: none. A stream that sends too little too slowly
	// is reset (H3_REQUEST_INCOMPLETE), as net/http's ReadHeaderTimeout
	// ends a slow HTTP/1.1 request.
	ReadHeaderTimeout time.Duration
}

// ServeConn serves c's requests until c ends or ctx is done; c's ALPN must
// be h3.
func (srv *Server) ServeConn(ctx context.Context, c *mpquic.Conn) error {
	sess := newSession(c)
	if err := sess.start(ctx); err != nil {
		return err
	}
	for {
		st, err := c.AcceptStream(ctx)
		if err != nil {
			return err
		}
		go srv.serveStream(sess, st)
	}
}

func (srv *Server) limit() int {
	if srv.MaxFieldSection > 0 {
		return srv.MaxFieldSection
	}
	return defaultMaxFieldSection
}

// connection-specific fields are not sent in HTTP/3 (RFC 9114 §4.2).
var hopByHop = map[string]bool{"connection": true, "keep-alive": true, "proxy-connection": true,
	"transfer-encoding": true, "upgrade": true}

func (srv *Server) serveStream(sess *session, st *mpquic.Stream) {
	fr := &frameReader{r: bufio.NewReaderSize(st, 16<<10)}
	if srv.ReadHeaderTimeout > 0 {
		st.SetReadDeadline(time.Now().Add(srv.ReadHeaderTimeout))
	}
	req, err := srv.readRequest(sess, fr, st)
	st.SetReadDeadline(time.Time{})
	if err != nil {
		var e *Error
		code := uint64(ErrCodeMessageError)
		if errors.As(err, &e) {
			code = e.Code
		} else if errors.Is(err, errDecompression) {
			sess.closeWith(ErrCodeDecompressionFailed, err.Error())
			return
		} else if errors.Is(err, io.EOF) || errors.Is(err, os.ErrDeadlineExceeded) {
			code = ErrCodeRequestIncomplete
		}
		st.CancelRead(code)
		st.CancelWrite(code)
		return
	}
	w := &responseWriter{st: st, bw: bufio.NewWriterSize(st, 32<<10), header: http.Header{}, head: req.Method == http.MethodHead}
	defer func() {
		if p := recover(); p != nil {
			st.CancelWrite(ErrCodeInternalError)
			st.CancelRead(ErrCodeInternalError)
			if p == http.ErrAbortHandler {
				return
			}
			panic(p)
		}
	}()
	srv.Handler.ServeHTTP(w, req)
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if err := w.bw.Flush(); err != nil {
		return
	}
	st.Close()
	req.Body.Close()
}

// readRequest reads the HEADERS frame and makes the request, its body the
// stream's DATA frames.
func (srv *Server) readRequest(sess *session, fr *frameReader, st *mpquic.Stream) (*http.Request, error) {
	typ, length, err := fr.next()
	if err != nil {
		return nil, err
	}
	if typ != frameHeaders {
		return nil, &Error{ErrCodeFrameUnexpected, fmt.Sprintf("frame 0x%x before HEADERS", typ)}
	}
	p, err := fr.payload(length, srv.limit()*2)
	if err != nil {
		return nil, err
	}
	fields, err := decodeFieldSection(p, srv.limit())
	if err != nil {
		return nil, err
	}
	var method, scheme, authority, path string
	header := http.Header{}
	regular := false
	for _, f := range fields {
		if strings.HasPrefix(f.Name, ":") {
			if regular {
				return nil, fmt.Errorf("%w: pseudo-header %s after a regular field", errMessage, f.Name)
			}
			var dst *string
			switch f.Name {
			case ":method":
				dst = &method
			case ":scheme":
				dst = &scheme
			case ":authority":
				dst = &authority
			case ":path":
				dst = &path
			default:
				return nil, fmt.Errorf("%w: pseudo-header %s", errMessage, f.Name)
			}
			if *dst != "" {
				return nil, fmt.Errorf("%w: %s twice", errMessage, f.Name)
			}
			*dst = f.Value
			continue
		}
		regular = true
		if hopByHop[f.Name] {
			return nil, fmt.Errorf("%w: connection-specific field %s", errMessage, f.Name)
		}
		header.Add(f.Name, f.Value)
	}
	if method == "" || (method != http.MethodConnect && (scheme == "" || path == "")) {
		return nil, fmt.Errorf("%w: missing pseudo-header", errMessage)
	}
	u, err := url.ParseRequestURI(path)
	if err != nil {
		return nil, fmt.Errorf("%w: path %q", errMessage, path)
	}
	u.Scheme, u.Host = scheme, authority
	host := authority
	if host == "" {
		host = header.Get("Host")
	}
	cl := int64(-1)
	if v := header.Get("Content-Length"); v != "" {
		if cl, err = strconv.ParseInt(v, 10, 64); err != nil || cl < 0 {
			return nil, fmt.Errorf("%w: content-length %q", errMessage, v)
		}
	}
	tls := sess.c.ConnectionState()
	req := &http.Request{Method: method, URL: u, Proto: "HTTP/3.0", ProtoMajor: 3, Header: header, Host: host,
		RequestURI: path, RemoteAddr: sess.c.RemoteAddr().String(), ContentLength: cl, TLS: &tls,
		Body: &body{fr: fr, st: st, want: cl}}
	return req.WithContext(context.Background()), nil
}

// body reads a message's DATA frames; other frames after them (trailers)
// end it.
type body struct {
	fr      *frameReader
	st      *mpquic.Stream
	want    int64 // content-length, -1 when unknown
	got     int64
	done    bool
	closed  bool
	onClose func()
}

func (b *body) Read(p []byte) (int, error) {
	if b.closed {
		return 0, errors.New("h3: read on a closed body")
	}
	for b.fr.left == 0 {
		if b.done {
			return 0, io.EOF
		}
		typ, length, err := b.fr.next()
		if err == io.EOF {
			b.done = true
			if b.want >= 0 && b.got != b.want {
				return 0, fmt.Errorf("%w: %d bytes of content-length %d", errMessage, b.got, b.want)
			}
			return 0, io.EOF
		}
		if err != nil {
			return 0, err
		}
		switch typ {
		case frameData:
			b.fr.left = length
		case frameHeaders: // trailers: read and dropped
			if _, err := b.fr.payload(length, defaultMaxFieldSection*2); err != nil {
				return 0, err
			}
		default:
			return 0, &Error{ErrCodeFrameUnexpected, fmt.Sprintf("frame 0x%x in a message", typ)}
		}
	}
	if uint64(len(p)) > b.fr.left {
		p = p[:b.fr.left]
	}
	n, err := b.fr.r.Read(p)
	b.fr.left -= uint64(n)
	b.got += int64(n)
	if b.want >= 0 && b.got > b.want {
		return n, fmt.Errorf("%w: body beyond content-length %d", errMessage, b.want)
	}
	if err == io.EOF {
		err = &Error{ErrCodeFrameError, "stream ended inside a DATA frame"}
	}
	return n, err
}

func (b *body) Close() error {
	if !b.closed {
		b.closed = true
		if !b.done {
			b.st.CancelRead(ErrCodeRequestCancelled) // §4.1.1: no more wanted
		}
		if b.onClose != nil {
			b.onClose()
		}
	}
	return nil
}

type responseWriter struct {
	st          *mpquic.Stream
	bw          *bufio.Writer
	header      http.Header
	wroteHeader bool
	head        bool
	frame       []byte
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		w.writeHeaders(code) // an interim response; the final one follows
		return
	}
	w.wroteHeader = true
	w.writeHeaders(code)
}

func (w *responseWriter) writeHeaders(code int) {
	fields := []Field{{":status", strconv.Itoa(code)}}
	for k, vs := range w.header {
		k = strings.ToLower(k)
		if hopByHop[k] {
			continue
		}
		for _, v := range vs {
			fields = append(fields, Field{k, v})
		}
	}
	fs := appendFieldSection(nil, fields)
	w.bw.Write(appendFrameHeader(nil, frameHeaders, uint64(len(fs))))
	w.bw.Write(fs)
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		if w.header.Get("Content-Type") == "" && len(p) > 0 {
			w.header.Set("Content-Type", http.DetectContentType(p))
		}
		w.WriteHeader(http.StatusOK)
	}
	if w.head || len(p) == 0 {
		return len(p), nil
	}
	w.frame = appendFrameHeader(w.frame[:0], frameData, uint64(len(p)))
	if _, err := w.bw.Write(w.frame); err != nil {
		return 0, err
	}
	return w.bw.Write(p)
}

// Flush sends what is buffered (http.Flusher).
func (w *responseWriter) Flush() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	w.bw.Flush()
}
