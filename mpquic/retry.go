package mpquic

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"net"
	"net/netip"
	"time"
)

// Retry (RFC 9000 §8.1.2, §17.2.5; RFC 9001 §5.8). A server that wants a
// client to prove its address before it keeps any state answers the
// client's first Initial with a Retry: a new connection ID and a token the
// client echoes in its next Initials. The token is the server's own:
// mptester's is sealed with a per-listener AES-GCM key, so the listener can
// check it with no state of its own, and it binds the client's address and
// port, the connection ID the client must use next, and an expiry.

// retryTokenLifetime bounds how long a token is accepted: a client echoes
// it at once, retransmissions included within a handshake timeout.
const retryTokenLifetime = 10 * time.Second

// retryAEAD returns a version's Retry integrity AEAD (RFC 9001 §5.8,
// RFC 9369 §3.3.3).
func retryAEAD(version uint32) cipher.AEAD {
	key := retryKeyV1
	if version == Version2 {
		key = retryKeyV2
	}
	block, _ := aes.NewCipher(key[:])
	gcm, _ := cipher.NewGCM(block)
	return gcm
}

// AppendRetry appends a Retry packet (RFC 9000 §17.2.5) to b: dcid is the
// client's source connection ID, scid the one the client is to use next,
// odcid the destination ID of the client's first Initial (the integrity
// tag covers it, RFC 9001 §5.8).
func AppendRetry(b []byte, dcid, scid, odcid, token []byte) []byte {
	return appendRetry(b, retryAEAD(Version1), nil, 0xf0, Version1, dcid, scid, odcid, token)
}

// appendRetry takes the integrity AEAD, a scratch buffer for the pseudo
// packet (a listener keeps both) and the first byte (its low 4 bits are
// unused; the RFC 9001 test vector sets them).
func appendRetry(b []byte, aead cipher.AEAD, scratch []byte, first byte, version uint32, dcid, scid, odcid, token []byte) []byte {
	start := len(b)
	b = append(b, first)
	b = binary.BigEndian.AppendUint32(b, version)
	b = append(b, byte(len(dcid)))
	b = append(b, dcid...)
	b = append(b, byte(len(scid)))
	b = append(b, scid...)
	b = append(b, token...)
	pseudo := append(append(append(scratch[:0], byte(len(odcid))), odcid...), b[start:]...)
	nonce := retryNonceV1
	if version == Version2 {
		nonce = retryNonceV2
	}
	return aead.Seal(b, nonce[:], nil, pseudo)
}

// retryTokens seals and opens the listener's Retry tokens. Used by the
// listener's read loop only.
type retryTokens struct {
	aead      cipher.AEAD
	integrity cipher.AEAD // version 1's Retry integrity AEAD
	buf       [256]byte   // the Retry being built
	pseudo    [256]byte   // its pseudo packet
	nonce     [12]byte    // 4 random bytes, then a counter: never repeats under one key
	ctr       uint64
}

func newRetryTokens() *retryTokens {
	var key [16]byte
	t := &retryTokens{integrity: retryAEAD(Version1)}
	if _, err := rand.Read(key[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	if _, err := rand.Read(t.nonce[:4]); err != nil {
		panic(err)
	}
	block, _ := aes.NewCipher(key[:])
	t.aead, _ = cipher.NewGCM(block)
	return t
}

const (
	retryTokenVersion = 0x5a
	// token: version, nonce, sealed (expiry, original DCID), tag
	retryTokenOverhead = 1 + 12 + 8 + 16
)

// tokenAAD is what a token is bound to besides its sealed contents: the
// client's address and port and the connection ID it was told to use.
func tokenAAD(dst []byte, from net.Addr, newDCID []byte) []byte {
	ap := addrPortOf(from)
	a := ap.Addr().As16()
	dst = append(dst, a[:]...)
	dst = binary.BigEndian.AppendUint16(dst, ap.Port())
	dst = append(dst, byte(len(newDCID)))
	return append(dst, newDCID...)
}

func addrPortOf(a net.Addr) netip.AddrPort {
	switch a := a.(type) {
	case *net.UDPAddr:
		return a.AddrPort()
	case interface{ AddrPort() netip.AddrPort }:
		return a.AddrPort()
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return ap
}

// seal makes the token of a Retry sent at now to from, telling it to use
// newDCID in place of odcid.
func (t *retryTokens) seal(now time.Time, from net.Addr, odcid, newDCID []byte) []byte {
	t.ctr++
	binary.BigEndian.PutUint64(t.nonce[4:], t.ctr)
	var ad [64]byte
	aad := tokenAAD(ad[:0], from, newDCID)
	var pt [8 + MaxConnIDLen]byte
	binary.BigEndian.PutUint64(pt[:8], uint64(now.Add(retryTokenLifetime).UnixNano()))
	n := 8 + copy(pt[8:], odcid)
	out := make([]byte, 0, retryTokenOverhead+len(odcid))
	out = append(out, retryTokenVersion)
	out = append(out, t.nonce[:]...)
	return t.aead.Seal(out, t.nonce[:], pt[:n], aad)
}

// open checks a token that arrived at now from from in an Initial to dcid
// and returns the original destination ID it carries; ok false if it is
// not ours, was altered, was issued to another address or for another
// connection ID, or has expired.
func (t *retryTokens) open(now time.Time, token []byte, from net.Addr, dcid []byte) (odcid []byte, ok bool) {
	if len(token) < retryTokenOverhead || len(token) > retryTokenOverhead+MaxConnIDLen || token[0] != retryTokenVersion {
		return nil, false
	}
	var ad [64]byte
	aad := tokenAAD(ad[:0], from, dcid)
	var pt [8 + MaxConnIDLen]byte
	plain, err := t.aead.Open(pt[:0], token[1:13], token[13:], aad)
	if err != nil || len(plain) < 8 {
		return nil, false
	}
	if now.UnixNano() > int64(binary.BigEndian.Uint64(plain[:8])) {
		return nil, false
	}
	return append([]byte(nil), plain[8:]...), true
}

// onRetry is a client's handling of a Retry (RFC 9000 §17.2.5.2): at most
// one, only before any Initial from the server, with a valid integrity tag,
// a token, and a new connection ID. The client then sends its Initials to
// that ID under the keys it gives, with the token; packet numbers go on
// (§17.2.5.3) and what was in flight is sent again, not counted as lost:
// a Retry resets loss recovery and its timers (RFC 9002 §6.3).
func (c *Conn) onRetry(h Header, pkt []byte) {
	p := c.p0()
	if !c.isClient || c.peerSCIDSeen || c.retrySCID != nil || len(h.Token) == 0 ||
		string(h.DCID) != string(c.scid) || string(h.SCID) == string(p.dcid) || !verifyRetryVersion(pkt, c.origDCID, c.version) {
		return
	}
	c.retrySCID = append([]byte{}, h.SCID...)
	c.initDCID = c.retrySCID // the Initial keys' (versionneg.go moves them)
	c.retryToken = append([]byte(nil), h.Token...)
	p.dcid = c.retrySCID
	client, server := InitialKeysVersion(c.retrySCID, c.version)
	in := c.spaces[spaceInitial]
	in.seal, in.open = client, server
	for _, sp := range in.Sent {
		if sp.InFlight {
			p.cc.Discard(sp.Size)
		}
		c.requeue(in, sp)
	}
	in.Sent = nil
	in.LossTime = time.Time{}
	p.ptoCount = 0
}
