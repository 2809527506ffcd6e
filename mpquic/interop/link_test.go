package interop

import (
	"sync"
	"time"
)

// link is the runner's simple-p2p bottleneck (its ns-3 scenario for the
// goodput and crosstraffic measurements: 10 Mbit/s each way, 15 ms one
// way, a drop-tail queue of 25 packets), emulated in the relay. Each
// direction is one queue shared by every relay on the link, so a
// competing flow through another relay competes for it. A datagram's
// departure is computed, not slept for: the link's rate holds however
// late the relay's goroutines run on a loaded machine.
type link struct {
	rate  float64 // bits per second
	delay time.Duration
	queue int // datagrams waiting or in transmission
	pipes [2]*pipe
}

func newLink(rateBits float64, delay time.Duration, queue int) *link {
	l := &link{rate: rateBits, delay: delay, queue: queue}
	for d := range l.pipes {
		p := &pipe{l: l, ch: make(chan *linkPkt, 4*queue+64)}
		l.pipes[d] = p
		go p.deliver()
	}
	return l
}

// runnerLink is the runner's: --delay=15ms --bandwidth=10Mbps --queue=25.
func runnerLink() *link { return newLink(10e6, 15*time.Millisecond, 25) }

type pipe struct {
	l  *link
	ch chan *linkPkt

	mu        sync.Mutex
	busyUntil time.Time   // when the last queued datagram has left
	departs   []time.Time // departures of the datagrams still queued
	drops     int
	closed    bool

	logMu sync.Mutex
	log   []delivery
}

type linkPkt struct {
	at   time.Time
	b    []byte
	flow *relay
	send func([]byte)
}

// delivery is one datagram that crossed the link.
type delivery struct {
	at    time.Time // when it left the link's far end
	size  int
	flow  *relay
	short bool // a short header (1-RTT)
}

// send queues a copy of b for d, or drops it when the queue is full;
// out is called with it at its far end.
func (l *link) send(d dir, flow *relay, b []byte, out func([]byte)) {
	p := l.pipes[d]
	now := time.Now()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	i := 0
	for i < len(p.departs) && !p.departs[i].After(now) {
		i++
	}
	p.departs = p.departs[i:]
	if len(p.departs) >= l.queue {
		p.drops++
		p.mu.Unlock()
		return
	}
	start := now
	if p.busyUntil.After(now) {
		start = p.busyUntil
	}
	// On the wire: the datagram plus IPv4 and UDP headers.
	depart := start.Add(time.Duration(float64((len(b)+28)*8) / l.rate * float64(time.Second)))
	p.busyUntil = depart
	p.departs = append(p.departs, depart)
	// Sent under the lock, so that close cannot come between.
	p.ch <- &linkPkt{at: depart.Add(l.delay), b: append([]byte(nil), b...), flow: flow, send: out}
	p.mu.Unlock()
}

// deliver hands each datagram on at its time (in order: a FIFO link).
func (p *pipe) deliver() {
	for pkt := range p.ch {
		if w := time.Until(pkt.at); w > 0 {
			time.Sleep(w)
		}
		// Logged first: whoever gets it may read the log at once.
		p.logMu.Lock()
		p.log = append(p.log, delivery{at: pkt.at, size: len(pkt.b), flow: pkt.flow, short: len(pkt.b) > 0 && pkt.b[0]&0x80 == 0})
		p.logMu.Unlock()
		pkt.send(pkt.b)
	}
}

func (l *link) close() {
	for _, p := range l.pipes {
		p.mu.Lock()
		if !p.closed {
			p.closed = true
			close(p.ch)
		}
		p.mu.Unlock()
	}
}

func (l *link) deliveries(d dir) []delivery {
	p := l.pipes[d]
	p.logMu.Lock()
	defer p.logMu.Unlock()
	return append([]delivery(nil), p.log...)
}

func (l *link) dropped(d dir) int {
	p := l.pipes[d]
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.drops
}

// goodput is the runner's measure: a file's bits over the time from the
// first to the last 1-RTT datagram of flow's server reaching the client
// (datagrams of 1000 bytes and more: the data, not the acknowledgments
// and the close after it).
func (l *link) goodput(flow *relay, fileBytes int) (kbps float64, first, last time.Time) {
	for _, dl := range l.deliveries(toClient) {
		if dl.flow != flow || !dl.short || dl.size < 1000 {
			continue
		}
		if first.IsZero() {
			first = dl.at
		}
		last = dl.at
	}
	if !last.After(first) {
		return 0, first, last
	}
	return float64(fileBytes*8) / last.Sub(first).Seconds() / 1e3, first, last
}

// rateOthers is what flows other than flow got to the client between
// from and to, in kbit/s.
func (l *link) rateOthers(flow *relay, from, to time.Time) float64 {
	var n int
	for _, dl := range l.deliveries(toClient) {
		if dl.flow != flow && !dl.at.Before(from) && !dl.at.After(to) {
			n += dl.size
		}
	}
	if !to.After(from) {
		return 0
	}
	return float64(n*8) / to.Sub(from).Seconds() / 1e3
}
