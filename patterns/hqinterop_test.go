package patterns

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// The server's mpquic port answers the QUIC interop runner's hq-interop
// (HTTP/0.9 on streams): quic-go's client, as the runner's quic-go client
// does, fetches a bulk object byte-exact; a path the server does not
// serve is reset.
func TestHQInteropOnMPQUICPort(t *testing.T) {
	srv := startServer(t, Limits{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := quic.DialAddr(ctx, "127.0.0.1:"+strconv.Itoa(int(srv.port("mpquic"))),
		&tls.Config{InsecureSkipVerify: true, NextProtos: []string{"hq-interop"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseWithError(0, "")
	get := func(path string) ([]byte, error) {
		s, err := c.OpenStreamSync(ctx)
		if err != nil {
			return nil, err
		}
		s.Write([]byte("GET " + path + "\r\n"))
		s.Close()
		return io.ReadAll(s)
	}
	const size = 1 << 20
	got, err := get("/bulk/" + strconv.Itoa(size) + "/hq")
	want, _ := io.ReadAll(NewBulkBody(size))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("hq-interop GET: %d bytes (want %d), %v", len(got), len(want), err)
	}
	var se *quic.StreamError
	if _, err := get("/no-such-path"); !errors.As(err, &se) {
		t.Fatalf("hq-interop GET of an unknown path: %v, want the stream reset", err)
	}
}
