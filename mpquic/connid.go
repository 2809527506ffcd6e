package mpquic

import "slices"

// Connection IDs (RFC 9000 §5.1): we issue extra IDs with NEW_CONNECTION_ID
// up to the peer's active_connection_id_limit and replace those it
// retires; we keep the IDs the peer issues, retire those below its
// retire_prior_to and can move to another (switchDCID), which is what a
// path change and, later, each multipath path needs.

// maxLocalCIDs caps how many IDs we keep active for the peer.
const maxLocalCIDs = 4

type peerCID struct {
	seq   uint64
	cid   []byte
	token [16]byte
}

func (c *Conn) initCIDs() {
	c.localCIDs = map[string]uint64{string(c.scid): 0}
	c.issued = map[uint64]NewConnectionIDFrame{}
	c.nextCIDSeq = 1
}

// ours says whether a packet's destination ID is one of ours.
func (c *Conn) ours(dcid []byte) bool {
	_, ok := c.localCIDs[string(dcid)]
	return ok
}

// issueCIDs tops our active IDs up to the peer's limit (after the
// handshake is confirmed, RFC 9000 §5.1.1).
func (c *Conn) issueCIDs() {
	want := int(min(c.peerParams.ActiveConnIDLimit, maxLocalCIDs))
	for len(c.localCIDs) < want {
		f := NewConnectionIDFrame{Seq: c.nextCIDSeq, ConnID: randomID(connIDLen)}
		copy(f.ResetToken[:], randomID(16))
		c.nextCIDSeq++
		c.localCIDs[string(f.ConnID)] = f.Seq
		c.issued[f.Seq] = f
		c.cidQueue = append(c.cidQueue, f.Seq)
		if c.onNewCID != nil {
			c.onNewCID(f.ConnID)
		}
	}
}

func (c *Conn) handleRetireCID(f RetireConnectionIDFrame) error {
	if f.Seq >= c.nextCIDSeq {
		return transportErr(ProtocolViolation, FrameRetireConnectionID, "retired connection ID %d was never issued", f.Seq)
	}
	for cid, seq := range c.localCIDs {
		if seq != f.Seq {
			continue
		}
		if len(c.localCIDs) == 1 {
			return transportErr(ProtocolViolation, FrameRetireConnectionID, "retired our last connection ID")
		}
		delete(c.localCIDs, cid)
		delete(c.issued, seq)
		if c.onRetireID != nil {
			c.onRetireID([]byte(cid))
		}
	}
	c.issueCIDs()
	return nil
}

func (c *Conn) handleNewCID(f NewConnectionIDFrame) error {
	if f.Seq < c.peerRetirePriorTo {
		c.retireQueue = append(c.retireQueue, f.Seq) // already retired (§19.15)
		return nil
	}
	for _, p := range c.peerCIDs {
		if p.seq == f.Seq {
			return nil // a repeat
		}
	}
	c.peerCIDs = append(c.peerCIDs, peerCID{seq: f.Seq, cid: append([]byte(nil), f.ConnID...), token: f.ResetToken})
	if f.RetirePriorTo > c.peerRetirePriorTo {
		c.peerRetirePriorTo = f.RetirePriorTo
		c.peerCIDs = slices.DeleteFunc(c.peerCIDs, func(p peerCID) bool {
			if p.seq < f.RetirePriorTo {
				c.retireQueue = append(c.retireQueue, p.seq)
				return true
			}
			return false
		})
		if c.dcidSeq < f.RetirePriorTo {
			if !c.switchDCID() {
				return transportErr(ProtocolViolation, FrameNewConnectionID, "every connection ID retired")
			}
		}
	}
	if active := len(c.peerCIDs); active > DefaultActiveConnIDLimit {
		return transportErr(ConnectionIDLimitError, FrameNewConnectionID, "%d active connection IDs, limit %d", active, DefaultActiveConnIDLimit)
	}
	return nil
}

// switchDCID moves to another ID of the peer and retires the one in use;
// false if the peer gave no other.
func (c *Conn) switchDCID() bool {
	for _, p := range c.peerCIDs {
		if p.seq == c.dcidSeq {
			continue
		}
		old := c.dcidSeq
		c.dcid, c.dcidSeq = p.cid, p.seq
		j := slices.IndexFunc(c.peerCIDs, func(q peerCID) bool { return q.seq == old })
		if j >= 0 {
			c.peerCIDs = slices.Delete(c.peerCIDs, j, j+1)
			c.retireQueue = append(c.retireQueue, old)
		}
		return true
	}
	return false
}
