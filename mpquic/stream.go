package mpquic

import (
	"context"
	"errors"
	"io"
	"os"
	"time"
)

// Stream is a bidirectional QUIC stream (RFC 9000 §2-4). Read and Write
// may be used from different goroutines; Close ends the sending direction
// with a FIN, as CloseWrite does.
type Stream struct {
	c  *Conn
	id uint64

	// Sending (guarded by c.mu).
	send                     sendBuf
	peerMax                  uint64 // peer's MAX_STREAM_DATA
	writeClosed              bool
	resetCode                *uint64 // we reset the stream (RESET_STREAM)
	resetPending, resetAcked bool
	stopErr                  error // the peer sent STOP_SENDING
	blockedAt                uint64

	// Receiving.
	recv              recvBuf
	recvMax           uint64 // our MAX_STREAM_DATA
	finalKnown        bool
	finalSize         uint64
	resetErr          error // the peer reset the stream
	readCanceled      bool
	stopPending       bool
	stopCode          uint64
	sendMaxStreamData bool

	readReady, writeReady chan struct{}
	readDeadline          time.Time
	writeDeadline         time.Time
	isActive              bool
	finished              bool
	sendWaiting           bool // in c.sendWaiters
	recvOnly              bool // the peer's unidirectional stream (unistream.go)
}

func (c *Conn) newStream(id uint64, peerMax uint64) *Stream {
	s := &Stream{c: c, id: id, peerMax: peerMax, recvMax: c.conf.StreamReceiveWindow,
		readReady: make(chan struct{}, 1), writeReady: make(chan struct{}, 1)}
	s.recv.entries = &c.recvGaps
	c.streams[id] = s
	return s
}

// StreamID is the stream's QUIC stream ID.
func (s *Stream) StreamID() uint64 { return s.id }

func (c *Conn) localStream(id uint64) bool { return (id&1 == 0) == c.isClient }

// OpenStream opens a bidirectional stream, waiting while the peer's
// MAX_STREAMS limit allows no more.
func (c *Conn) OpenStream(ctx context.Context) (*Stream, error) {
	for {
		c.mu.Lock()
		if c.closeErr != nil {
			err := c.closeErr
			c.mu.Unlock()
			return nil, err
		}
		if c.nextLocalBidi/4 < c.peerMaxBidi {
			s := c.newStream(c.nextLocalBidi, c.peerParams.InitialMaxStreamDataBidiRemote)
			c.nextLocalBidi += 4
			if c.nextLocalBidi/4 < c.peerMaxBidi {
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

// AcceptStream waits for a stream the peer opened.
func (c *Conn) AcceptStream(ctx context.Context) (*Stream, error) {
	for {
		c.mu.Lock()
		if len(c.acceptQ) > 0 {
			s := c.acceptQ[0]
			c.acceptQ = c.acceptQ[1:]
			if len(c.acceptQ) > 0 {
				notify(c.acceptReady)
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
		case <-c.acceptReady:
		case <-c.ending:
		}
	}
}

func (s *Stream) wait(ch chan struct{}, deadline time.Time) error {
	var tc <-chan time.Time
	if !deadline.IsZero() {
		d := time.Until(deadline)
		if d <= 0 {
			return os.ErrDeadlineExceeded
		}
		t := time.NewTimer(d)
		defer t.Stop()
		tc = t.C
	}
	select {
	case <-ch:
	case <-tc:
		return os.ErrDeadlineExceeded
	case <-s.c.ending:
	}
	return nil
}

// Read reads received data in order; io.EOF after the peer's FIN.
func (s *Stream) Read(p []byte) (int, error) {
	c := s.c
	for {
		c.mu.Lock()
		if s.readCanceled {
			c.mu.Unlock()
			return 0, &StreamError{StreamID: s.id, Code: s.stopCode}
		}
		if s.recv.readable() > 0 && len(p) > 0 {
			n := s.recv.read(p)
			c.onConsumed(s, n)
			c.mu.Unlock()
			return n, nil
		}
		if s.resetErr != nil {
			err := s.resetErr
			c.mu.Unlock()
			return 0, err
		}
		if s.finalKnown && s.recv.readOff == s.finalSize {
			c.maybeDone(s)
			c.mu.Unlock()
			return 0, io.EOF
		}
		if c.closeErr != nil {
			err := c.closeErr
			c.mu.Unlock()
			return 0, err
		}
		if len(p) == 0 {
			c.mu.Unlock()
			return 0, nil
		}
		dl := s.readDeadline
		c.mu.Unlock()
		if err := s.wait(s.readReady, dl); err != nil {
			return 0, err
		}
	}
}

// onConsumed extends the windows once the reader took half of one (the
// stream's and the connection's; RFC 9000 §4.2).
func (c *Conn) onConsumed(s *Stream, n int) {
	c.dataConsumed += uint64(n)
	w := c.conf.StreamReceiveWindow
	if s.recvMax-s.recv.readOff < w/2 && !s.finalKnown {
		s.recvMax = s.recv.readOff + w
		s.sendMaxStreamData = true
		c.activate(s)
		c.signal()
	}
	cw := c.conf.ConnectionReceiveWindow
	if c.localMaxData-c.dataConsumed < cw/2 {
		c.localMaxData = c.dataConsumed + cw
		c.sendMaxData = true
		c.signal()
	}
}

func (s *Stream) writeErr() error {
	switch {
	case s.c.closeErr != nil:
		return s.c.closeErr
	case s.resetCode != nil:
		return &StreamError{StreamID: s.id, Code: *s.resetCode}
	case s.stopErr != nil:
		return s.stopErr
	case s.writeClosed:
		return errors.New("mpquic: write on a stream closed for writing")
	}
	return nil
}

// sendFloor is what a stream may queue unsent beyond the connection's
// budget (ConnectionSendBuffer).
const sendFloor = 16 << 10

// Write queues p for sending, waiting while the send buffer is full.
func (s *Stream) Write(p []byte) (int, error) {
	c := s.c
	n := 0
	for {
		c.mu.Lock()
		if err := s.writeErr(); err != nil {
			c.mu.Unlock()
			return n, err
		}
		// Each stream may queue sendFloor whatever the others hold, so a
		// stream the peer reads is never stuck behind ones it does not.
		room := c.conf.SendBuffer - int(s.send.unsent())
		croom := max(c.conf.ConnectionSendBuffer-c.unsent, min(sendFloor, c.conf.SendBuffer)-int(s.send.unsent()))
		if croom < room {
			room = croom
			if room <= 0 && !s.sendWaiting {
				s.sendWaiting = true
				c.sendWaiters = append(c.sendWaiters, s)
			}
		}
		if room > 0 && len(p) > 0 {
			k := min(room, len(p))
			s.send.write(p[:k])
			c.unsent += k
			p, n = p[k:], n+k
			c.activate(s)
			c.signal()
		}
		dl := s.writeDeadline
		c.mu.Unlock()
		if len(p) == 0 {
			return n, nil
		}
		if err := s.wait(s.writeReady, dl); err != nil {
			return n, err
		}
	}
}

// Close ends the sending direction (FIN); reading continues.
func (s *Stream) Close() error { return s.CloseWrite() }

// CloseWrite sends a FIN after the data written so far.
func (s *Stream) CloseWrite() error {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.writeClosed || s.resetCode != nil {
		return nil
	}
	s.writeClosed = true
	s.send.fin = true
	c.activate(s)
	c.signal()
	return nil
}

// CancelWrite abandons sending with RESET_STREAM and an application code.
func (s *Stream) CancelWrite(code uint64) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.resetCode != nil || s.send.allAcked() {
		return
	}
	c.resetSend(s, code)
	c.signal()
	notify(s.writeReady)
}

// resetSend abandons the sending side with RESET_STREAM: what was never
// sent never will be and leaves the connection's unsent count.
func (c *Conn) resetSend(s *Stream, code uint64) {
	s.resetCode, s.resetPending = &code, true
	s.send.lost, s.send.finLost = nil, false
	c.unsent -= int(s.send.unsent())
	c.wakeSendWaiters()
	c.activate(s)
}

// wakeSendWaiters lets the Writes blocked on the connection's unsent
// budget try again once half of it is free.
func (c *Conn) wakeSendWaiters() {
	if len(c.sendWaiters) == 0 || c.unsent > c.conf.ConnectionSendBuffer/2 {
		return
	}
	for _, s := range c.sendWaiters {
		s.sendWaiting = false
		notify(s.writeReady)
	}
	clear(c.sendWaiters)
	c.sendWaiters = c.sendWaiters[:0]
}

// CancelRead asks the peer to stop sending (STOP_SENDING) and discards
// what arrives.
func (s *Stream) CancelRead(code uint64) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.readCanceled || (s.finalKnown && s.recv.readOff == s.finalSize) {
		return
	}
	s.readCanceled, s.stopPending, s.stopCode = true, true, code
	n := s.recv.readable()
	s.recv.discard()
	s.recv.readOff += uint64(n)
	c.onConsumed(s, n)
	c.activate(s)
	c.signal()
	notify(s.readReady)
}

// SetDeadline sets both deadlines.
func (s *Stream) SetDeadline(t time.Time) error {
	s.SetReadDeadline(t)
	return s.SetWriteDeadline(t)
}

// SetReadDeadline makes a waiting or later Read fail with
// os.ErrDeadlineExceeded at t; zero clears it.
func (s *Stream) SetReadDeadline(t time.Time) error {
	s.c.mu.Lock()
	s.readDeadline = t
	s.c.mu.Unlock()
	notify(s.readReady)
	return nil
}

// SetWriteDeadline is SetReadDeadline for Write.
func (s *Stream) SetWriteDeadline(t time.Time) error {
	s.c.mu.Lock()
	s.writeDeadline = t
	s.c.mu.Unlock()
	notify(s.writeReady)
	return nil
}

func (c *Conn) activate(s *Stream) {
	if !s.isActive && !s.finished {
		s.isActive = true
		c.active = append(c.active, s)
	}
}

// maybeDone forgets a stream finished both ways; a peer's stream frees a
// slot for another (MAX_STREAMS, RFC 9000 §4.6).
func (c *Conn) maybeDone(s *Stream) {
	if s.finished {
		return
	}
	recvDone := s.resetErr != nil || (s.finalKnown && s.recv.readOff == s.finalSize) || (s.readCanceled && s.finalKnown)
	sendDone := s.recvOnly || s.send.allAcked() || (s.resetCode != nil && s.resetAcked)
	if !recvDone || !sendDone {
		return
	}
	s.finished = true
	delete(c.streams, s.id)
	if s.recvOnly {
		c.uniDone()
	} else if !c.localStream(s.id) {
		c.peerBidiClosed++
		c.localMaxBidi = c.peerBidiClosed + c.conf.MaxIncomingStreams
		c.sendMaxStreams = true
		c.signal()
	}
}

// failStreams wakes every waiter so it sees closeErr.
func (c *Conn) failStreams() {
	for _, s := range c.streams {
		notify(s.readReady)
		notify(s.writeReady)
	}
	notify(c.openReady)
	notify(c.acceptReady)
	notify(c.uni.acceptReady)
}

// streamFor finds the stream a frame names, opening peer streams up to it
// (RFC 9000 §3.2). A nil stream and nil error: a finished stream.
func (c *Conn) streamFor(id uint64, ft FrameType) (*Stream, error) {
	if id&2 != 0 {
		return c.uniStreamFor(id, ft)
	}
	if c.localStream(id) {
		if id >= c.nextLocalBidi {
			return nil, transportErr(StreamStateError, ft, "stream %d was never opened", id)
		}
		return c.streams[id], nil
	}
	n := id/4 + 1
	if n > c.localMaxBidi {
		return nil, transportErr(StreamLimitError, ft, "stream %d beyond the limit of %d streams", id, c.localMaxBidi)
	}
	for c.nextPeerBidi < n {
		sid := c.nextPeerBidi * 4
		if c.isClient {
			sid++ // server-initiated
		}
		c.acceptQ = append(c.acceptQ, c.newStream(sid, c.peerParams.InitialMaxStreamDataBidiLocal))
		c.nextPeerBidi++
		notify(c.acceptReady)
	}
	return c.streams[id], nil
}

func (c *Conn) handleStreamFrame(f Frame) error {
	switch f := f.(type) {
	case *StreamFrame:
		return c.handleStreamData(f)
	case StreamFrame:
		return c.handleStreamData(&f)
	case ResetStreamFrame:
		s, err := c.streamFor(f.StreamID, FrameResetStream)
		if s == nil || err != nil {
			return err
		}
		if (s.finalKnown && f.FinalSize != s.finalSize) || f.FinalSize < s.recv.highest {
			return transportErr(FinalSizeError, FrameResetStream, "stream %d reset at %d, had %d", s.id, f.FinalSize, s.recv.highest)
		}
		if err := c.creditRecv(s, f.FinalSize, FrameResetStream); err != nil {
			return err
		}
		s.finalKnown, s.finalSize = true, f.FinalSize
		if s.resetErr == nil {
			s.resetErr = &StreamError{StreamID: s.id, Code: f.ErrorCode, Remote: true}
			// Bytes never read count as consumed for connection flow control.
			c.dataConsumed += f.FinalSize - s.recv.readOff
			s.recv.discard()
			s.recv.readOff = f.FinalSize
		}
		notify(s.readReady)
		c.maybeDone(s)
	case StopSendingFrame:
		s, err := c.streamFor(f.StreamID, FrameStopSending)
		if s == nil || err != nil {
			return err
		}
		if s.stopErr == nil {
			s.stopErr = &StreamError{StreamID: s.id, Code: f.ErrorCode, Remote: true}
		}
		if s.resetCode == nil && !s.send.allAcked() {
			c.resetSend(s, f.ErrorCode) // RFC 9000 §3.5
		}
		notify(s.writeReady)
	case MaxStreamDataFrame:
		s, err := c.streamFor(f.StreamID, FrameMaxStreamData)
		if s == nil || err != nil {
			return err
		}
		if f.Max > s.peerMax {
			s.peerMax = f.Max
			c.activate(s)
		}
	case MaxDataFrame:
		c.peerMaxData = max(c.peerMaxData, f.Max)
		for _, s := range c.streams {
			if s.send.hasNew() {
				c.activate(s)
			}
		}
	case MaxStreamsFrame:
		if f.Bidi && f.Max > c.peerMaxBidi {
			c.peerMaxBidi = f.Max
			notify(c.openReady)
		}
		if !f.Bidi && f.Max > c.uni.peerMax {
			c.uni.peerMax = f.Max
			notify(c.openReady)
		}
	case StreamDataBlockedFrame:
		if _, err := c.streamFor(f.StreamID, FrameStreamDataBlocked); err != nil {
			return err
		}
	case DataBlockedFrame, StreamsBlockedFrame:
	default:
		return transportErr(ProtocolViolation, f.Type(), "unexpected frame")
	}
	return nil
}

// handleStreamData takes a STREAM frame's data into its stream.
func (c *Conn) handleStreamData(f *StreamFrame) error {
	s, err := c.streamFor(f.StreamID, f.Type())
	if s == nil || err != nil {
		return err
	}
	end := f.Offset + uint64(len(f.Data))
	if s.finalKnown && (end > s.finalSize || (f.Fin && end != s.finalSize)) {
		return transportErr(FinalSizeError, f.Type(), "stream %d data to %d, final size %d", s.id, end, s.finalSize)
	}
	if f.Fin && !s.finalKnown {
		if end < s.recv.highest {
			return transportErr(FinalSizeError, f.Type(), "stream %d final size %d below received %d", s.id, end, s.recv.highest)
		}
		s.finalKnown, s.finalSize = true, end
	}
	if err := c.creditRecv(s, end, f.Type()); err != nil {
		return err
	}
	if !s.readCanceled && s.resetErr == nil {
		s.recv.push(f.Offset, f.Data)
		if err := c.checkGaps(s, f.Type()); err != nil {
			return err
		}
	} else {
		s.recv.highest = max(s.recv.highest, end)
	}
	notify(s.readReady)
	if s.finalKnown && s.recv.contiguous() == s.finalSize {
		c.maybeDone(s)
	}
	return nil
}

// gapLimits bound the pieces of data held beyond gaps, per stream and per
// connection (RFC 9000 §21.13): one per 512 bytes of the receive window,
// more than a sender's packets can leave, even reordered over paths of
// different delays (each packet leaves at most one gap per stream), and
// few enough that a peer sending single bytes with gaps between them
// commits a few dozen bytes of bookkeeping per byte of window, not
// hundreds.
func (c *Conn) gapLimits() (stream, conn int) {
	return max(64, int(c.conf.StreamReceiveWindow/512)), max(256, int(c.conf.ConnectionReceiveWindow/512))
}

// checkGaps closes the connection of a peer that fragments a stream
// beyond the limits: PROTOCOL_VIOLATION (§21.9 allows a connection error
// against a peer that makes us commit resources to no progress).
func (c *Conn) checkGaps(s *Stream, ft FrameType) error {
	sl, cl := c.gapLimits()
	if g := s.recv.gaps(); g > sl {
		return transportErr(ProtocolViolation, ft, "stream %d fragmented into %d pieces beyond gaps, limit %d", s.id, g, sl)
	}
	if c.recvGaps > cl {
		return transportErr(ProtocolViolation, ft, "streams fragmented into %d pieces beyond gaps, limit %d per connection", c.recvGaps, cl)
	}
	return nil
}

// creditRecv checks received data against our stream and connection
// limits (RFC 9000 §4.1): beyond them is FLOW_CONTROL_ERROR.
func (c *Conn) creditRecv(s *Stream, end uint64, ft FrameType) error {
	if end > s.recvMax {
		return transportErr(FlowControlError, ft, "stream %d data to %d beyond its limit %d", s.id, end, s.recvMax)
	}
	if end > s.recv.highest {
		c.dataRecvd += end - s.recv.highest
		s.recv.highest = end
		if c.dataRecvd > c.localMaxData {
			return transportErr(FlowControlError, ft, "connection data %d beyond its limit %d", c.dataRecvd, c.localMaxData)
		}
	}
	return nil
}
