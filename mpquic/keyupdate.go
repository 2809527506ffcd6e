package mpquic

import (
	"errors"
	"time"
)

// Key update (RFC 9001 §6) over several paths. The 1-RTT keys and the key
// phase are the connection's, shared by every path, but packet numbers are
// per path (RFC 10069 §"Key Update"), so "is this packet older than the
// update?" is asked per path: the first packet number received in the
// current phase is kept for each path. A packet whose phase bit differs
// from ours is of the previous phase if that path has not yet carried a
// packet of the current phase or it is numbered below the first one; else
// it starts the peer's next update. When the guess is old and the previous
// keys fail, the next keys are tried (the peer may update on a path that
// had not carried the current phase yet).
//
// We initiate an update every Config.KeyUpdateInterval packets (and on
// UpdateKeys), never before the handshake is confirmed and never before a
// packet of the current phase was acknowledged (§6.1, §6.5). The previous
// read keys are dropped three PTOs after the first packet of the new phase
// arrived (§6.5).

// ErrKeyUpdateNotAllowed: a key update now would break RFC 9001 §6.1: the
// handshake is not confirmed, or no packet of the current key phase has
// been acknowledged yet.
var ErrKeyUpdateNotAllowed = errors.New("mpquic: key update not allowed yet (handshake unconfirmed or the last update unacknowledged)")

// defaultKeyUpdateInterval is half AES-128-GCM's confidentiality limit of
// 2^23 packets per key (RFC 9001 §6.6).
const defaultKeyUpdateInterval = 1 << 22

// keyPhaseState is the connection's key-phase bookkeeping.
type keyPhaseState struct {
	firstRecv       map[uint32]uint64 // per path, the first PN received in the current phase
	firstSent       map[uint32]uint64 // per path, the first PN we send in the current phase
	acked           bool              // a packet of the current phase was acknowledged
	sentInPhase     int64
	dropPrevAt      time.Time // previous read keys go then (zero: not yet set)
	updatesByPeer   uint64
	updatesByUs     uint64
	prevKeysUsed    uint64 // packets opened with the previous phase's keys
	prevKeysDropped uint64 // previous phases' read keys dropped
}

// openKeys picks the read keys for a 1-RTT packet of path pid whose phase
// bit is phase and number pn; next says they are the next phase's.
func (c *Conn) openKeys(ks *pnSpace, pid uint32, phase bool, pn uint64, now time.Time) (keys *Keys, next bool) {
	c.maybeDropPrevKeys(now)
	if phase == c.keyPhase {
		return ks.open, false
	}
	first, seen := c.kp.firstRecv[pid]
	if c.prevOpen != nil && (!seen || pn < first) {
		return c.prevOpen, false
	}
	return c.nextReadKeys(ks), true
}

// maybeDropPrevKeys drops the previous phase's read keys three PTOs after
// the new phase's first packet arrived (§6.5): later packets of the old
// phase are dropped, so its keys cannot be attacked for long.
func (c *Conn) maybeDropPrevKeys(now time.Time) {
	if c.prevOpen != nil && !c.kp.dropPrevAt.IsZero() && now.After(c.kp.dropPrevAt) {
		c.prevOpen = nil
		c.kp.prevKeysDropped++
	}
}

func (c *Conn) nextReadKeys(ks *pnSpace) *Keys {
	if c.nextOpen == nil {
		c.nextOpen, _ = ks.open.NextKeys()
	}
	return c.nextOpen
}

// received notes a packet opened in the current phase on path pid.
func (c *Conn) receivedInPhase(pid uint32, pn uint64, now time.Time) {
	if c.kp.firstRecv == nil {
		c.kp.firstRecv = map[uint32]uint64{}
	}
	if first, ok := c.kp.firstRecv[pid]; !ok || pn < first {
		c.kp.firstRecv[pid] = pn
	}
	if c.prevOpen != nil && c.kp.dropPrevAt.IsZero() {
		c.kp.dropPrevAt = now.Add(3 * c.ptoDuration())
	}
}

// switchPhase moves both directions to the next keys (the peer's update
// or ours); readNext are the next read keys.
func (c *Conn) switchPhase(ks *pnSpace, readNext *Keys) error {
	seal, err := ks.seal.NextKeys()
	if err != nil {
		return err
	}
	c.prevOpen, ks.open, c.nextOpen, ks.seal = ks.open, readNext, nil, seal
	c.keyPhase = !c.keyPhase
	c.kp.firstRecv = map[uint32]uint64{}
	c.kp.firstSent = map[uint32]uint64{}
	c.kp.acked, c.kp.sentInPhase, c.kp.dropPrevAt = false, 0, time.Time{}
	return nil
}

// peerUpdated follows the peer's key update, whose first packet (number pn
// on path pid) opened with the next keys.
func (c *Conn) peerUpdated(ks *pnSpace, keys *Keys, pid uint32, pn uint64, now time.Time) *TransportError {
	if !c.confirmed {
		return transportErr(KeyUpdateError, 0, "key update before the handshake was confirmed")
	}
	if err := c.switchPhase(ks, keys); err != nil {
		return transportErr(InternalError, 0, "key update: %v", err)
	}
	c.kp.updatesByPeer++
	if c.qlog != nil {
		c.qlog.keyUpdated(now, true, c.kp.updatesByPeer+c.kp.updatesByUs)
	}
	c.receivedInPhase(pid, pn, now)
	return nil
}

// initiateKeyUpdate starts a key update of ours if §6.1 allows it.
func (c *Conn) initiateKeyUpdate() error {
	ks := c.spaces[spaceApp]
	if !c.confirmed || !c.kp.acked || ks.seal == nil {
		return ErrKeyUpdateNotAllowed
	}
	if err := c.switchPhase(ks, c.nextReadKeys(ks)); err != nil {
		return err
	}
	c.kp.updatesByUs++
	if c.qlog != nil {
		c.qlog.keyUpdated(time.Now(), false, c.kp.updatesByPeer+c.kp.updatesByUs)
	}
	return nil
}

// sentInPhase notes a 1-RTT packet sent on path pid with number pn.
func (c *Conn) sentInPhase(pid uint32, pn uint64) {
	if c.kp.firstSent == nil {
		c.kp.firstSent = map[uint32]uint64{}
	}
	if _, ok := c.kp.firstSent[pid]; !ok {
		c.kp.firstSent[pid] = pn
	}
	c.kp.sentInPhase++
}

// ackedInPhase notes that the peer acknowledged up to largest on path pid.
func (c *Conn) ackedInPhase(pid uint32, largest uint64) {
	if first, ok := c.kp.firstSent[pid]; ok && largest >= first {
		c.kp.acked = true
	}
}

// maybeUpdateKeys initiates the periodic update when it is due.
func (c *Conn) maybeUpdateKeys() {
	interval := c.conf.KeyUpdateInterval
	if interval == 0 {
		interval = defaultKeyUpdateInterval
	}
	if interval > 0 && c.kp.sentInPhase >= interval && c.kp.acked {
		c.initiateKeyUpdate()
	}
}

// UpdateKeys starts a key update now (RFC 9001 §6): ErrKeyUpdateNotAllowed
// before the handshake is confirmed or while the last update (either
// side's) has no acknowledged packet yet.
func (c *Conn) UpdateKeys() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing || c.isDone() {
		return ErrClosed
	}
	if err := c.initiateKeyUpdate(); err != nil {
		if errors.Is(err, ErrKeyUpdateNotAllowed) && c.confirmed && !c.kp.acked {
			// Nothing of this phase acknowledged: an idle connection that
			// sent only ACKs since the last update would never be, so a
			// PING asks for the acknowledgment that lets a later call in.
			if c.queuePing(time.Now()) {
				c.signal()
			}
		}
		return err
	}
	c.signal()
	return nil
}
