package mpquic

import "slices"

// PATH_CIDS_BLOCKED (RFC 10069, draft-21 §"PATH_CIDS_BLOCKED frame"): an
// endpoint that wants to use a path ID for which it holds none of the
// peer's connection IDs says so, with the sequence number of the next ID
// it expects. We send it when AddPath waits for IDs; on receipt we issue
// what our limit allows for that path ID and announce again the IDs the
// peer should hold, in case their frames were lost unnoticed.

// pathCIDsState is a connection's PATH_CIDS_BLOCKED bookkeeping.
type pathCIDsState struct {
	owed       []PathCIDsBlockedFrame // to send
	sent, recv uint64                 // frames sent and received
}

// blockedOnCIDs notes that AddPath waits for the peer's IDs of path id
// (once per wait: the frame is owed until sent).
func (c *Conn) blockedOnCIDs(id uint32) {
	next := uint64(0)
	for _, p := range c.cidSet(id).peer {
		next = max(next, p.seq+1)
	}
	for _, f := range c.pathCIDs.owed {
		if f.PathID == uint64(id) {
			return
		}
	}
	c.pathCIDs.owed = append(c.pathCIDs.owed, PathCIDsBlockedFrame{PathID: uint64(id), NextSeq: next})
	c.signal()
}

// onPathCIDsBlocked answers the peer's PATH_CIDS_BLOCKED.
func (c *Conn) onPathCIDsBlocked(f PathCIDsBlockedFrame) error {
	if f.PathID > uint64(c.localMaxPathID) {
		return transportErr(ProtocolViolation, FramePathCIDsBlocked, "path %d is above our limit %d", f.PathID, c.localMaxPathID)
	}
	id := uint32(f.PathID)
	cs := c.cidSet(id)
	if f.NextSeq > cs.nextSeq {
		return transportErr(ProtocolViolation, FramePathCIDsBlocked, "path %d: waiting for ID %d, we issued up to %d", id, f.NextSeq, cs.nextSeq)
	}
	c.pathCIDs.recv++
	if p := c.paths[id]; p != nil && p.abandoned {
		return nil
	}
	c.issueCIDs()
	// Announce again those the peer should already hold (a repeat is
	// ignored by its receiver, RFC 9000 §19.15).
	for seq := range cs.issued {
		if seq >= f.NextSeq && !slices.Contains(cs.queue, seq) {
			cs.queue = append(cs.queue, seq)
		}
	}
	return nil
}
