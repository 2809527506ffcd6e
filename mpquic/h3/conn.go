// Package h3 is HTTP/3 (RFC 9114) over mpquic connections, written from
// the RFCs: a server (Server.ServeConn) and a client (ClientConn, an
// http.RoundTripper), with QPACK (RFC 9204) limited to the static table
// (dynamic table capacity 0, so no encoder or decoder stream is needed).
// Server push, CONNECT, trailers and priorities are not supported: a
// response's trailers are dropped, a push is refused by never sending
// MAX_PUSH_ID.
package h3

import (
	"bufio"
	"context"
	"io"
	"sync"

	"github.com/mptester/mptester/mpquic"
)

// ALPN is HTTP/3's TLS application protocol (RFC 9114 §3.1).
const ALPN = "h3"

// defaultMaxFieldSection bounds a decoded field section (ours and what we
// announce as SETTINGS_MAX_FIELD_SECTION_SIZE).
const defaultMaxFieldSection = 64 << 10

// session is what both ends keep per connection: our control stream and
// the peer's unidirectional streams (§6.2).
type session struct {
	c    *mpquic.Conn
	once sync.Once
	err  error

	mu           sync.Mutex
	peerSettings map[uint64]uint64
	settingsCh   chan struct{} // closed on the peer's SETTINGS
	goaway       bool
}

func newSession(c *mpquic.Conn) *session {
	return &session{c: c, settingsCh: make(chan struct{})}
}

// start opens our control stream with our SETTINGS and reads the peer's
// unidirectional streams until ctx ends.
func (s *session) start(ctx context.Context) error {
	s.once.Do(func() {
		st, err := s.c.OpenUniStream(ctx)
		if err != nil {
			s.err = err
			return
		}
		var set []byte
		set = appendVarint(set, settingMaxFieldSectionSize)
		set = appendVarint(set, defaultMaxFieldSection)
		b := appendVarint(nil, streamControl)
		b = appendFrameHeader(b, frameSettings, uint64(len(set)))
		if _, s.err = st.Write(append(b, set...)); s.err != nil {
			return
		}
		// The control stream stays open for the connection's life (§6.2.1).
		go s.acceptUni(ctx)
	})
	return s.err
}

func (s *session) closeWith(code uint64, reason string) {
	s.c.CloseWithError(code, reason)
}

func (s *session) acceptUni(ctx context.Context) {
	seenControl := false
	for {
		st, err := s.c.AcceptUniStream(ctx)
		if err != nil {
			return
		}
		r := bufio.NewReader(st)
		typ, err := readVarint(r)
		if err != nil {
			st.CancelRead(ErrCodeStreamCreationError)
			continue
		}
		switch typ {
		case streamControl:
			if seenControl {
				s.closeWith(ErrCodeStreamCreationError, "second control stream")
				return
			}
			seenControl = true
			go s.readControl(r)
		case streamEncoder, streamDecoder:
			// With capacity 0 the peer's encoder can only set the capacity
			// to 0, and our decoder instructions are none: read and drop.
			go io.Copy(io.Discard, r)
		case streamPush:
			// We never sent MAX_PUSH_ID, so no push may come (§4.6).
			s.closeWith(ErrCodeStreamCreationError, "push stream without MAX_PUSH_ID")
			return
		default:
			st.CancelRead(ErrCodeStreamCreationError) // unknown type (§6.2.3)
		}
	}
}

// readControl reads the peer's control stream: SETTINGS first (§6.2.1),
// GOAWAY later; its end is a connection error (§6.2.1).
func (s *session) readControl(r *bufio.Reader) {
	fr := &frameReader{r: r}
	first := true
	for {
		typ, length, err := fr.next()
		if err != nil {
			s.closeWith(ErrCodeClosedCriticalStream, "control stream ended")
			return
		}
		if first != (typ == frameSettings) {
			code := uint64(ErrCodeFrameUnexpected)
			if first {
				code = ErrCodeMissingSettings
			}
			s.closeWith(code, "SETTINGS must open the control stream, once")
			return
		}
		p, err := fr.payload(length, 16<<10)
		if err != nil {
			s.closeWith(ErrCodeFrameError, err.Error())
			return
		}
		switch typ {
		case frameSettings:
			m, err := parseSettings(p)
			if err != nil {
				e := err.(*Error)
				s.closeWith(e.Code, e.Reason)
				return
			}
			s.mu.Lock()
			s.peerSettings = m
			s.mu.Unlock()
			close(s.settingsCh)
			first = false
		case frameGoaway:
			s.mu.Lock()
			s.goaway = true
			s.mu.Unlock()
		case frameData, frameHeaders, 0x05:
			s.closeWith(ErrCodeFrameUnexpected, "request frame on the control stream")
			return
		}
	}
}
