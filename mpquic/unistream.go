package mpquic

import "context"

// Unidirectional streams (RFC 9000 §2.1, §3): ours only send, the peer's
// only receive; HTTP/3 carries its control and QPACK streams on them. They
// are *Streams whose other direction is finished from the start. The peer
// may open Config.MaxIncomingUniStreams at once (none by default: a peer's
// uni stream nobody accepts would hold its window), raised by MAX_STREAMS
// as they finish (§4.6).

type uniStreams struct {
	nextLocal   uint64 // count of streams we opened
	peerMax     uint64 // streams we may open (count)
	nextPeer    uint64 // count of peer streams seen
	localMax    uint64 // streams the peer may open (count)
	peerClosed  uint64
	sendMax     bool // a MAX_STREAMS (uni) is due
	acceptQ     []*Stream
	acceptReady chan struct{}
}

func uniID(count uint64, client bool) uint64 {
	id := count*4 + 2
	if !client {
		id++
	}
	return id
}

// OpenUniStream opens a unidirectional stream, waiting while the peer's
// MAX_STREAMS limit allows no more. Reading it returns io.EOF.
func (c *Conn) OpenUniStream(ctx context.Context) (*Stream, error) {
	for {
		c.mu.Lock()
		if c.closeErr != nil {
			err := c.closeErr
			c.mu.Unlock()
			return nil, err
		}
		if c.uni.nextLocal < c.uni.peerMax {
			s := c.newStream(uniID(c.uni.nextLocal, c.isClient), c.peerParams.InitialMaxStreamDataUni)
			s.finalKnown = true // nothing to receive
			c.uni.nextLocal++
			if c.uni.nextLocal < c.uni.peerMax {
				notify(c.openReady)
			}
			c.mu.Unlock()
			return s, nil
		}
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.openReady:
		case <-c.ending:
		}
	}
}

// AcceptUniStream waits for a unidirectional stream the peer opened.
// Writing it fails.
func (c *Conn) AcceptUniStream(ctx context.Context) (*Stream, error) {
	for {
		c.mu.Lock()
		if len(c.uni.acceptQ) > 0 {
			s := c.uni.acceptQ[0]
			c.uni.acceptQ = c.uni.acceptQ[1:]
			if len(c.uni.acceptQ) > 0 {
				notify(c.uni.acceptReady)
			}
			c.mu.Unlock()
			return s, nil
		}
		if c.closeErr != nil {
			err := c.closeErr
			c.mu.Unlock()
			return nil, err
		}
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.uni.acceptReady:
		case <-c.ending:
		}
	}
}

// uniStreamFor is streamFor for a unidirectional stream ID: a frame that
// only the sender may send (STREAM, RESET_STREAM, STREAM_DATA_BLOCKED)
// must name a peer's stream, one only the receiver sends (MAX_STREAM_DATA,
// STOP_SENDING) ours (§19.4-19.5, §19.8-19.10, §19.13).
func (c *Conn) uniStreamFor(id uint64, ft FrameType) (*Stream, error) {
	senderFrame := ft != FrameMaxStreamData && ft != FrameStopSending
	if c.localStream(id) {
		if senderFrame {
			return nil, transportErr(StreamStateError, ft, "frame for our send-only stream %d", id)
		}
		if id >= uniID(c.uni.nextLocal, c.isClient) {
			return nil, transportErr(StreamStateError, ft, "stream %d was never opened", id)
		}
		return c.streams[id], nil
	}
	if !senderFrame {
		return nil, transportErr(StreamStateError, ft, "frame for the peer's receive-only stream %d", id)
	}
	n := id/4 + 1
	if n > c.uni.localMax {
		return nil, transportErr(StreamLimitError, ft, "unidirectional stream %d beyond the limit of %d streams", id, c.uni.localMax)
	}
	for c.uni.nextPeer < n {
		s := c.newStream(uniID(c.uni.nextPeer, !c.isClient), 0)
		s.writeClosed, s.recvOnly = true, true
		c.uni.acceptQ = append(c.uni.acceptQ, s)
		c.uni.nextPeer++
		notify(c.uni.acceptReady)
	}
	return c.streams[id], nil
}

// uniDone frees a finished peer stream's slot.
func (c *Conn) uniDone() {
	c.uni.peerClosed++
	c.uni.localMax = c.uni.peerClosed + c.conf.MaxIncomingUniStreams
	c.uni.sendMax = true
	c.signal()
}
