package interop

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mptester/mptester/mpquic"
)

// connectionmigration in role mpquic-client: mpquic's client moves its
// one path to a new local socket (RFC 9000 §9.2, mpquic's Migrate) once
// a third of the file has been read. Reading waits meanwhile, so that
// the rest waits in the server's flow control and crosses the new path
// (as quic-go's client does in the other role).

// gate holds a body's reader at a byte count until it opens.
type gate struct {
	at      int
	read    atomic.Int64
	reached chan struct{} // closed when the reader got to at
	open    chan struct{}
	once    sync.Once
}

type gateKey struct{}

// atAThird arms a gate at a third of o's files: act runs once the body's
// reader gets there, and reading goes on when act returns (not at all if
// ctx ends first).
func atAThird(ctx context.Context, o *opts, act func()) context.Context {
	g := &gate{at: o.total() / 3, reached: make(chan struct{}), open: make(chan struct{})}
	go func() {
		defer close(g.open)
		select {
		case <-g.reached:
			act()
		case <-ctx.Done():
		}
	}()
	return context.WithValue(ctx, gateKey{}, g)
}

// gated is r, held by ctx's gate if it has one.
func gated(ctx context.Context, r io.Reader) io.Reader {
	g, ok := ctx.Value(gateKey{}).(*gate)
	if !ok {
		return r
	}
	return readerFunc(func(b []byte) (int, error) {
		n, err := r.Read(b)
		if g.read.Add(int64(n)) > int64(g.at) {
			g.once.Do(func() { close(g.reached) })
			select {
			case <-g.open:
			case <-ctx.Done():
			}
		}
		return n, err
	})
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(b []byte) (int, error) { return f(b) }

// withMigration arms the move of c for o's transfer: the returned
// context carries the gate, and done reports the move's error once the
// transfer ended.
func withMigration(ctx context.Context, o *opts, c *mpquic.Conn, logf func(string, ...any)) (context.Context, func() error) {
	errc := make(chan error, 1)
	ctx = atAThird(ctx, o, func() {
		pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			errc <- err
			return
		}
		go func() { <-ctx.Done(); pc.Close() }()
		mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		from := c.LocalAddr()
		if err := c.Migrate(mctx, pc); err != nil {
			errc <- errors.Join(errors.New("mpquic client migration"), err)
			return
		}
		logf("mpquic's client moved from %s to %s, new path validated", from, c.LocalAddr())
		errc <- nil
	})
	return ctx, func() error {
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// checkNewDCID is the runner's check of an active migration: the
// client's first packet from a new address carries a connection ID it
// did not use from the old one (RFC 9000 §9.5). The server's IDs are as
// long as the Source Connection ID of its first long header.
func checkNewDCID(t *testing.T, r *run) {
	t.Helper()
	log := r.relay.seenLog()
	n := -1
	for _, s := range log {
		if s.dir == toClient && s.version != 0 && len(s.head) > 6 && int(6+s.head[5]) < len(s.head) {
			n = int(s.head[6+s.head[5]])
			break
		}
	}
	if n <= 0 || 1+n > 32 {
		t.Fatalf("no server connection ID length on the wire (%d)", n)
	}
	var back, dcid string
	moves := 0
	for _, s := range log {
		if s.dir != toServer || s.version != 0 || len(s.head) < 1+n {
			continue
		}
		id := hex.EncodeToString(s.head[1 : 1+n])
		if back != "" && s.back != back {
			moves++
			if id == dcid {
				t.Errorf("the client's first packet from its new address (relay socket %s) carries the old connection ID %s", s.back, id)
			}
		}
		back, dcid = s.back, id
	}
	if moves == 0 {
		t.Error("no short-header packet of the client's from a second address")
	}
}

// checkPathValidation is the runner's check that PATH_CHALLENGE and
// PATH_RESPONSE frames were sent and received, read in the peer's own
// qlog, both ways: mpquic's challenge (its client validating the new
// path, or its server the client's new address) came back answered with
// its data, and so did the peer's.
func checkPathValidation(t *testing.T, r *run) {
	t.Helper()
	type frame struct {
		Type string `json:"frame_type"`
		Data string `json:"data"`
	}
	var ev struct {
		Name string `json:"name"`
		Data struct {
			Frames []frame `json:"frames"`
		} `json:"data"`
	}
	waitQlog(r.peerEv, `"path_response"`)
	// by direction (sent by the peer or received) and frame type: the data
	challenges := map[bool]map[string]bool{true: {}, false: {}}
	responses := map[bool]map[string]bool{true: {}, false: {}}
	for _, l := range strings.Split(r.peerEv.qlogText(), "\n") {
		l = strings.TrimLeft(l, "\x1e")
		if !strings.Contains(l, `"path_`) || json.Unmarshal([]byte(l), &ev) != nil {
			continue
		}
		sent := strings.HasSuffix(ev.Name, "packet_sent")
		if !sent && !strings.HasSuffix(ev.Name, "packet_received") {
			continue
		}
		for _, f := range ev.Data.Frames {
			switch f.Type {
			case "path_challenge":
				challenges[sent][f.Data] = true
			case "path_response":
				responses[sent][f.Data] = true
			}
		}
	}
	answered := func(challengeSent bool) int {
		n := 0
		for d := range challenges[challengeSent] {
			if responses[!challengeSent][d] {
				n++
			}
		}
		return n
	}
	ours, theirs := answered(false), answered(true)
	if ours == 0 {
		t.Errorf("%s's qlog shows no PATH_CHALLENGE of mpquic's received and answered (%d received)", r.peer.name(), len(challenges[false]))
	}
	if theirs == 0 {
		t.Errorf("%s's qlog shows no PATH_CHALLENGE of its own answered by mpquic (%d sent)", r.peer.name(), len(challenges[true]))
	}
	t.Logf("path validation in %s's qlog: %d of mpquic's challenges answered, %d of its own", r.peer.name(), ours, theirs)
}
