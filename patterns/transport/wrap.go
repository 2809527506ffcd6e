package transport

import (
	"io"
	"net/http"
)

// Operations named in classified errors.
const (
	opRead  = "read"
	opWrite = "write"
	opHTTP  = "http"
)

// classified gives a stream's read and write errors their status: the
// transport's own classifier (own, may be nil) first, the common one after.
type classified struct {
	Stream
	own func(error) Status
}

func (s classified) Read(p []byte) (int, error) { return readClassified(s.Stream, p, s.own) }

func readClassified(r io.Reader, p []byte, own func(error) Status) (int, error) {
	n, err := r.Read(p)
	if err != nil {
		err = wrap(opRead, err, own)
	}
	return n, err
}

func (s classified) Write(p []byte) (int, error) {
	n, err := s.Stream.Write(p)
	if err != nil {
		err = wrap(opWrite, err, s.own)
	}
	return n, err
}

// classifiedRT does the same for HTTP requests and their bodies.
type classifiedRT struct {
	rt  http.RoundTripper
	own func(error) Status
}

func (c classifiedRT) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(r)
	if err != nil {
		return nil, wrap(opHTTP, err, c.own)
	}
	resp.Body = classifiedBody{resp.Body, c.own}
	return resp, nil
}

type classifiedBody struct {
	io.ReadCloser
	own func(error) Status
}

func (b classifiedBody) Read(p []byte) (int, error) { return readClassified(b.ReadCloser, p, b.own) }
