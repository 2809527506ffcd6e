package mpquic

import "slices"

// Connection IDs (RFC 9000 §5.1), one set per path ID
// (draft-ietf-quic-multipath-21 §"Path Identifier"): we issue extra IDs up
// to the peer's active_connection_id_limit (NEW_CONNECTION_ID for path 0,
// PATH_NEW_CONNECTION_ID for the others) and replace those it retires; we
// keep the IDs the peer issues, retire those below its retire_prior_to and
// can move a path to another (switchDCID).

// maxLocalCIDs caps how many IDs we keep active for the peer per path.
const maxLocalCIDs = 4

type peerCID struct {
	seq      uint64
	cid      []byte
	token    [16]byte
	hasToken bool // a client's first ID has none (§18.2)
}

// cidSet is one path ID's connection IDs in both directions.
type cidSet struct {
	id                uint32                          // the path ID
	issued            map[uint64]NewConnectionIDFrame // ours, by sequence number
	nextSeq           uint64
	queue             []uint64 // ours to announce, by sequence number
	peer              []peerCID
	peerRetirePriorTo uint64
	retireQueue       []uint64 // the peer's to retire
}

type cidRef struct {
	path uint32
	seq  uint64
}

func (c *Conn) initCIDs() {
	c.localCIDs = map[string]cidRef{string(c.scid): {}}
	c.cids, c.cidOrder = map[uint32]*cidSet{}, nil
	c.cidSet(0).nextSeq = 1
}

func (c *Conn) cidSet(id uint32) *cidSet {
	cs := c.cids[id]
	if cs == nil {
		cs = &cidSet{id: id, issued: map[uint64]NewConnectionIDFrame{}}
		c.cids[id] = cs
		c.cidOrder = append(c.cidOrder, cs)
	}
	return cs
}

// ours says whether a packet's destination ID is one of ours.
func (c *Conn) ours(dcid []byte) bool {
	_, ok := c.localCIDs[string(dcid)]
	return ok
}

func (c *Conn) localCount(id uint32) int {
	n := 0
	for _, r := range c.localCIDs {
		if r.path == id {
			n++
		}
	}
	return n
}

// issueCIDs tops our active IDs up to the peer's limit (after the
// handshake is confirmed, RFC 9000 §5.1.1), for path 0 and, with
// multipath, for every path ID both sides allow that was not abandoned.
func (c *Conn) issueCIDs() {
	want := int(min(c.peerParams.ActiveConnIDLimit, maxLocalCIDs))
	last := uint32(0)
	if c.multipath {
		last = c.maxPathID()
	}
	for id := uint32(0); id <= last; id++ {
		if p := c.paths[id]; p != nil && p.abandoned {
			continue
		}
		cs := c.cidSet(id)
		for n := c.localCount(id); n < want; n++ {
			f := NewConnectionIDFrame{Seq: cs.nextSeq, ConnID: randomID(connIDLen)}
			f.ResetToken = c.conf.StatelessResetKey.token(f.ConnID)
			cs.nextSeq++
			c.localCIDs[string(f.ConnID)] = cidRef{path: id, seq: f.Seq}
			cs.issued[f.Seq] = f
			cs.queue = append(cs.queue, f.Seq)
			if c.onNewCID != nil {
				c.onNewCID(f.ConnID)
			}
		}
	}
}

func (c *Conn) handleRetireCID(id uint32, seq uint64, ft FrameType) error {
	cs := c.cidSet(id)
	if seq >= cs.nextSeq {
		return transportErr(ProtocolViolation, ft, "retired connection ID %d of path %d was never issued", seq, id)
	}
	for cid, r := range c.localCIDs {
		if r.path != id || r.seq != seq {
			continue
		}
		if id == 0 && c.localCount(0) == 1 {
			return transportErr(ProtocolViolation, ft, "retired our last connection ID")
		}
		delete(c.localCIDs, cid)
		delete(cs.issued, seq)
		if c.onRetireID != nil {
			c.onRetireID([]byte(cid))
		}
	}
	c.issueCIDs()
	return nil
}

func (c *Conn) handleNewCID(id uint32, seq, retirePriorTo uint64, cid []byte, token [16]byte, ft FrameType) error {
	cs := c.cidSet(id)
	if seq < cs.peerRetirePriorTo {
		cs.retireQueue = append(cs.retireQueue, seq) // already retired (§19.15)
		return nil
	}
	for _, p := range cs.peer {
		if p.seq == seq {
			return nil // a repeat
		}
	}
	cs.peer = append(cs.peer, peerCID{seq: seq, cid: append([]byte(nil), cid...), token: token, hasToken: true})
	if p := c.paths[id]; p != nil && p.dcid == nil && !p.abandoned {
		// The path's first packet overtook the IDs to answer it with
		// (a server's new path): it can send now.
		p.dcid, p.dcidSeq = cs.peer[len(cs.peer)-1].cid, seq
	}
	if retirePriorTo > cs.peerRetirePriorTo {
		cs.peerRetirePriorTo = retirePriorTo
		cs.peer = slices.DeleteFunc(cs.peer, func(p peerCID) bool {
			if p.seq < retirePriorTo {
				cs.retireQueue = append(cs.retireQueue, p.seq)
				return true
			}
			return false
		})
		if p := c.paths[id]; p != nil && p.dcid != nil && p.dcidSeq < retirePriorTo {
			if !c.switchDCID(p) {
				return transportErr(ProtocolViolation, ft, "every connection ID of path %d retired", id)
			}
		}
	}
	if active := len(cs.peer); active > DefaultActiveConnIDLimit {
		return transportErr(ConnectionIDLimitError, ft, "%d active connection IDs, limit %d", active, DefaultActiveConnIDLimit)
	}
	return nil
}

// switchDCID moves path p to another ID of the peer for its path ID and
// retires the one in use; false if the peer gave no other.
func (c *Conn) switchDCID(p *path) bool {
	cs := c.cidSet(p.id)
	for _, q := range cs.peer {
		if q.seq == p.dcidSeq {
			continue
		}
		old := p.dcidSeq
		p.dcid, p.dcidSeq = q.cid, q.seq
		j := slices.IndexFunc(cs.peer, func(r peerCID) bool { return r.seq == old })
		if j >= 0 {
			cs.peer = slices.Delete(cs.peer, j, j+1)
			cs.retireQueue = append(cs.retireQueue, old)
		}
		return true
	}
	return false
}
