package probe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

// udpMux is one UDP socket per server, bound to the path, shared by every
// query to that server: a reader hands each answer to the query waiting
// for its ID (checked against the question too). A socket per query cost
// a socket, a bind, a connect and a close each, a fifth of the resolver's
// CPU (issue 18). The socket closes itself after muxIdle without queries.
type udpMux struct {
	mu      sync.Mutex
	conn    net.Conn // nil while closed
	waiters map[uint16]chan []byte
}

const muxIdle = 2 * time.Second

// muxRcvBuf holds a burst of a resolver cap's worth of answers.
const muxRcvBuf = 4 << 20

// errMuxMismatch: the answer carrying our ID is for another question.
var errMuxMismatch = errors.New("answer does not match the question")

// exchangeUDP sends m to server i over the shared socket and waits for
// the answer until the attempt's timeout.
func (r *Resolver) exchangeUDP(ctx context.Context, i int, m *dns.Msg, sent *int64) (*dns.Msg, error) {
	mx := &r.muxes[i]
	mx.mu.Lock()
	if mx.conn == nil {
		conn, err := DialContext(ctx, r.path, "udp", r.servers[i].String())
		if err != nil {
			mx.mu.Unlock()
			return nil, err
		}
		// Every answer from this server arrives on this one socket.
		if sc, ok := conn.(syscall.Conn); ok {
			RaiseReceiveBuffer(sc, muxRcvBuf)
		}
		mx.conn, mx.waiters = conn, map[uint16]chan []byte{}
		go mx.read(conn)
	}
	var id uint16
	for {
		id = uint16(rand.Uint32())
		if _, busy := mx.waiters[id]; !busy {
			break
		}
	}
	ch := make(chan []byte, 1)
	mx.waiters[id] = ch
	conn := mx.conn
	mx.mu.Unlock()
	done := func() {
		mx.mu.Lock()
		if mx.waiters[id] == ch {
			delete(mx.waiters, id)
		}
		mx.mu.Unlock()
	}
	m.Id = id
	b, err := m.Pack()
	if err != nil {
		done()
		return nil, err
	}
	n := int64(m.Len()) + overhead("udp", r.servers[i].Addr())
	r.opts.Bytes.Add(n)
	*sent += n
	if _, err := conn.Write(b); err != nil {
		done()
		return nil, err
	}
	tm := time.NewTimer(r.opts.Timeout)
	defer tm.Stop()
	for {
		select {
		case a := <-ch:
			resp := new(dns.Msg)
			if err := resp.Unpack(a); err != nil || !sameQuestion(m, resp) {
				// Not ours after all (spoofed, or a late answer to an
				// earlier query that had this ID): keep waiting.
				mx.mu.Lock()
				if _, busy := mx.waiters[id]; busy {
					mx.mu.Unlock()
					return nil, fmt.Errorf("%w (and its ID is taken again)", errMuxMismatch)
				}
				mx.waiters[id] = ch
				mx.mu.Unlock()
				continue
			}
			return resp, nil
		case <-tm.C:
			done()
			return nil, fmt.Errorf("no answer from %s within %v: %w", r.servers[i], r.opts.Timeout, os.ErrDeadlineExceeded)
		case <-ctx.Done():
			done()
			return nil, ctx.Err()
		}
	}
}

func sameQuestion(q, a *dns.Msg) bool {
	if a.Id != q.Id || len(a.Question) != 1 || len(q.Question) != 1 {
		return false
	}
	x, y := q.Question[0], a.Question[0]
	return x.Qtype == y.Qtype && x.Qclass == y.Qclass && strings.EqualFold(x.Name, y.Name)
}

// read hands answers to their waiters until the socket fails or has been
// idle for muxIdle.
func (mx *udpMux) read(conn net.Conn) {
	buf := make([]byte, 65535)
	for {
		conn.SetReadDeadline(time.Now().Add(muxIdle))
		n, err := conn.Read(buf)
		mx.mu.Lock()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && len(mx.waiters) > 0 && mx.conn == conn {
				mx.mu.Unlock()
				continue
			}
			if mx.conn == conn {
				mx.conn = nil // waiters left time out on their own
			}
			mx.mu.Unlock()
			conn.Close()
			return
		}
		if n >= 12 {
			id := binary.BigEndian.Uint16(buf)
			if ch := mx.waiters[id]; ch != nil {
				delete(mx.waiters, id)
				ch <- append([]byte(nil), buf[:n]...)
			}
		}
		mx.mu.Unlock()
	}
}
