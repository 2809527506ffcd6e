package h3

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/mptester/mptester/mpquic"
)

// ClientConn sends HTTP/3 requests on one mpquic connection (ALPN h3);
// it is an http.RoundTripper for URLs of that connection's server.
type ClientConn struct {
	sess   *session
	cancel context.CancelFunc
	// MaxFieldSection bounds a response's decoded header section; default
	// 64 KiB.
	MaxFieldSection int
}

// NewClientConn starts HTTP/3 on c: it opens the control stream.
func NewClientConn(c *mpquic.Conn) (*ClientConn, error) {
	ctx, cancel := context.WithCancel(context.Background())
	sess := newSession(c)
	if err := sess.start(ctx); err != nil {
		cancel()
		return nil, err
	}
	go func() {
		<-c.Done()
		cancel()
	}()
	return &ClientConn{sess: sess, cancel: cancel}, nil
}

func (cc *ClientConn) limit() int {
	if cc.MaxFieldSection > 0 {
		return cc.MaxFieldSection
	}
	return defaultMaxFieldSection
}

// Close stops reading the peer's streams; the connection is the caller's.
func (cc *ClientConn) Close() error { cc.cancel(); return nil }

// RoundTrip sends req on a new stream and reads the response head; the
// body streams from the DATA frames.
func (cc *ClientConn) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	st, err := cc.sess.c.OpenStream(ctx)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() {
		st.CancelWrite(ErrCodeRequestCancelled)
		st.CancelRead(ErrCodeRequestCancelled)
	})
	fail := func(err error) (*http.Response, error) {
		stop()
		st.CancelWrite(ErrCodeRequestCancelled)
		st.CancelRead(ErrCodeRequestCancelled)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if err := cc.writeRequest(st, req); err != nil {
		return fail(err)
	}
	fr := &frameReader{r: bufio.NewReaderSize(st, 32<<10)}
	for {
		typ, length, err := fr.next()
		if err != nil {
			return fail(fmt.Errorf("h3: response head: %w", err))
		}
		if typ != frameHeaders {
			return fail(&Error{ErrCodeFrameUnexpected, fmt.Sprintf("frame 0x%x before the response's HEADERS", typ)})
		}
		p, err := fr.payload(length, cc.limit()*2)
		if err != nil {
			return fail(err)
		}
		fields, err := decodeFieldSection(p, cc.limit())
		if err != nil {
			if errors.Is(err, errDecompression) {
				cc.sess.closeWith(ErrCodeDecompressionFailed, err.Error())
			}
			return fail(err)
		}
		resp, err := response(fields, req)
		if err != nil {
			return fail(err)
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 {
			continue // interim (§4.1): the final response follows
		}
		b := &body{fr: fr, st: st, want: resp.ContentLength, onClose: func() { stop() }}
		if req.Method == http.MethodHead {
			b.want = -1
		}
		resp.Body = b
		return resp, nil
	}
}

func response(fields []Field, req *http.Request) (*http.Response, error) {
	resp := &http.Response{Proto: "HTTP/3.0", ProtoMajor: 3, Header: http.Header{}, Request: req, ContentLength: -1}
	status := ""
	for _, f := range fields {
		switch {
		case f.Name == ":status":
			status = f.Value
		case strings.HasPrefix(f.Name, ":"):
			return nil, fmt.Errorf("%w: pseudo-header %s in a response", errMessage, f.Name)
		default:
			resp.Header.Add(f.Name, f.Value)
		}
	}
	code, err := strconv.Atoi(status)
	if err != nil || code < 100 || code > 999 {
		return nil, fmt.Errorf("%w: :status %q", errMessage, status)
	}
	resp.StatusCode, resp.Status = code, status+" "+http.StatusText(code)
	if v := resp.Header.Get("Content-Length"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			resp.ContentLength = n
		}
	}
	return resp, nil
}

func (cc *ClientConn) writeRequest(st *mpquic.Stream, req *http.Request) error {
	authority := req.Host
	if authority == "" {
		authority = req.URL.Host
	}
	fields := []Field{{":method", req.Method}, {":scheme", "https"}, {":authority", authority}, {":path", req.URL.RequestURI()}}
	for k, vs := range req.Header {
		k = strings.ToLower(k)
		if hopByHop[k] || k == "host" {
			continue
		}
		for _, v := range vs {
			fields = append(fields, Field{k, v})
		}
	}
	if req.ContentLength > 0 && req.Header.Get("Content-Length") == "" {
		fields = append(fields, Field{"content-length", strconv.FormatInt(req.ContentLength, 10)})
	}
	fs := appendFieldSection(nil, fields)
	bw := bufio.NewWriterSize(st, 16<<10)
	bw.Write(appendFrameHeader(nil, frameHeaders, uint64(len(fs))))
	bw.Write(fs)
	if req.Body != nil && req.Body != http.NoBody {
		buf := make([]byte, 16<<10)
		for {
			n, err := req.Body.Read(buf)
			if n > 0 {
				bw.Write(appendFrameHeader(nil, frameData, uint64(n)))
				if _, werr := bw.Write(buf[:n]); werr != nil {
					return werr
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
		}
		req.Body.Close()
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return st.Close()
}
