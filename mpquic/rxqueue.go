package mpquic

import "sync"

// inQueueLen is how many datagrams may wait for a connection's goroutine:
// enough for the flow control window it granted, so that everything the
// peer may have in flight can wait, and a receiver that falls behind slows
// its sender through ACKs and credit instead of dropping. Dropping here was
// loss that no network caused, which the peer rightly declared (
// over an unshaped second lab path 1,100-2,000 datagrams in 2 s, against
// 30 the emulator dropped).
func inQueueLen(conf Config) int {
	n := int(min(conf.StreamReceiveWindow, conf.ConnectionReceiveWindow) / uint64(conf.MaxDatagramSize-40))
	return min(max(n, 1024), 16384)
}

// inChanLen: a client's readers block on a full channel (the socket buffer
// then holds what arrives); a server's connection uses its rxQueue.
func inChanLen(isClient bool, conf Config) int {
	if !isClient {
		return 1
	}
	return inQueueLen(conf)
}

// rxQueue is a server connection's input: the listener's one reader
// appends without ever blocking (one slow connection must not stall the
// others) and the connection takes datagrams in order. Unlike a channel it
// takes memory only while datagrams wait.
type rxQueue struct {
	mu    sync.Mutex
	q     []datagram
	head  int
	limit int
	ready chan struct{} // a datagram waits
}

func newRxQueue(limit int) *rxQueue {
	return &rxQueue{limit: limit, ready: make(chan struct{}, 1)}
}

// push queues d; false (dropped) when limit datagrams already wait.
func (r *rxQueue) push(d datagram) bool {
	r.mu.Lock()
	if len(r.q)-r.head >= r.limit {
		r.mu.Unlock()
		return false
	}
	r.q = append(r.q, d)
	r.mu.Unlock()
	notify(r.ready)
	return true
}

// pushLimit is push with a lower limit than the queue's, when limit > 0.
func (r *rxQueue) pushLimit(d datagram, limit int) bool {
	if limit <= 0 || limit >= r.limit {
		return r.push(d)
	}
	r.mu.Lock()
	if len(r.q)-r.head >= limit {
		r.mu.Unlock()
		return false
	}
	r.q = append(r.q, d)
	r.mu.Unlock()
	notify(r.ready)
	return true
}

// pop takes the oldest waiting datagram.
func (r *rxQueue) pop() (datagram, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.head == len(r.q) {
		return datagram{}, false
	}
	d := r.q[r.head]
	r.q[r.head] = datagram{}
	r.head++
	if r.head == len(r.q) {
		r.q, r.head = r.q[:0], 0
		if cap(r.q) > 4096 {
			r.q = nil // give a burst's memory back
		}
	}
	return d, true
}
