package mpquic

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net"
	"sync"
	"time"
)

// Stateless reset (RFC 9000 §10.3). Every connection ID we issue carries
// a token derived from it with a static key (§10.3.2: HMAC of the ID), so
// an endpoint that lost its state (a crashed or restarted server with the
// same key) can still answer a packet for one of its old IDs with a
// packet the peer recognises: the peer then ends the connection at once
// instead of retransmitting into silence until its idle timeout.

// ErrStatelessReset ends a connection whose peer answered with a stateless
// reset: it no longer has the connection's state.
var ErrStatelessReset = errors.New("mpquic: stateless reset by the peer (it lost the connection's state)")

// StatelessResetKey is the secret stateless reset tokens are derived from.
type StatelessResetKey [32]byte

// NewStatelessResetKey returns a random key.
func NewStatelessResetKey() *StatelessResetKey {
	var k StatelessResetKey
	if _, err := rand.Read(k[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return &k
}

// token is the stateless reset token of connection ID cid (§10.3.2).
func (k *StatelessResetKey) token(cid []byte) (t [16]byte) {
	m := hmac.New(sha256.New, k[:])
	m.Write(cid)
	copy(t[:], m.Sum(nil))
	return t
}

const (
	// minResetSize: a short header's first byte, 38 unpredictable bits
	// in all (§10.3) and the token.
	minResetSize = 21
	// resetSize is what we send for a trigger above it; a trigger of
	// this size or less gets a reset one byte shorter (§10.3: so a reset
	// never triggers one as large, §10.3.3).
	resetSize = 43
	// resetRate and resetBurst bound the resets a listener sends a
	// second: stray packets cannot turn it into a packet source (§10.3).
	resetRate  = 100
	resetBurst = 20
)

// appendStatelessReset appends a reset answering a trigger of n bytes, or
// returns b unchanged if n is too short to answer (§10.3.3).
func appendStatelessReset(b []byte, n int, token [16]byte) []byte {
	size := min(n-1, resetSize)
	if size < minResetSize {
		return b
	}
	start := len(b)
	b = append(b, make([]byte, size-16)...)
	if _, err := rand.Read(b[start:]); err != nil {
		panic(err)
	}
	b[start] = b[start]&0x3f | 0x40 // short header form, fixed bit
	return append(b, token[:]...)
}

// resetLimiter is a token bucket of resets.
type resetLimiter struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time
	sent   uint64
}

func (r *resetLimiter) allow(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last.IsZero() {
		r.tokens = resetBurst
	} else {
		r.tokens = min(resetBurst, r.tokens+now.Sub(r.last).Seconds()*resetRate)
	}
	r.last = now
	if r.tokens < 1 {
		return false
	}
	r.tokens--
	r.sent++
	return true
}

// maybeReset answers a short-header datagram for a connection ID that is
// none of ours (dcid: its first connIDLen bytes after the first byte)
// with a stateless reset, within the rate.
func (l *Listener) maybeReset(b, dcid []byte, to net.Addr) {
	if b[0]&0x80 != 0 || len(b)-1 < minResetSize || !l.resets.allow(time.Now()) {
		return
	}
	l.pconn.WriteTo(appendStatelessReset(nil, len(b), l.conf.StatelessResetKey.token(dcid)), to)
}

// StatelessResetsSent counts the stateless resets the listener sent.
func (l *Listener) StatelessResetsSent() uint64 {
	l.resets.mu.Lock()
	defer l.resets.mu.Unlock()
	return l.resets.sent
}

// isStatelessReset says whether datagram b, none of whose packets could
// be processed, ends with the token of one of the peer's connection IDs
// we hold (§10.3.1: compared in constant time).
func (c *Conn) isStatelessReset(b []byte) bool {
	if len(b) < minResetSize || b[0]&0x80 != 0 {
		return false
	}
	tail := b[len(b)-16:]
	found := 0
	for _, cs := range c.cids {
		for _, p := range cs.peer {
			if p.hasToken {
				found |= subtle.ConstantTimeCompare(tail, p.token[:])
			}
		}
	}
	return found == 1
}
