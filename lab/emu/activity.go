package emu

import (
	"sync/atomic"
	"time"
)

// Activity is when a direction last carried packets: the lab's ground
// truth for handover times (000 §IV-A: first data packet on cellular,
// last packet sent / received on Wi-Fi). Zero times: nothing yet.
type Activity struct {
	// FirstDataIn and LastDataIn: arrivals (the sender's send time) of
	// the first and last packet carrying transport payload (TCP segment
	// with data, any UDP datagram), dropped ones included.
	FirstDataIn time.Time `json:"first_data_in,omitzero"`
	LastDataIn  time.Time `json:"last_data_in,omitzero"`
	// LastIn: arrival of the last packet of any kind (pure ACKs too).
	LastIn time.Time `json:"last_in,omitzero"`
	// LastOut and LastDataOut: the last packet, and the last one
	// carrying payload, delivered to the receiver.
	LastOut     time.Time `json:"last_out,omitzero"`
	LastDataOut time.Time `json:"last_data_out,omitzero"`
}

// activity holds link-clock times plus one (0: none).
type activity struct {
	firstDataIn, lastDataIn, lastIn, lastOut, lastDataOut atomic.Int64
}

func (a *activity) delivered(pkt []byte, now int64) {
	a.lastOut.Store(now + 1)
	if payloadLen(pkt) > 0 {
		a.lastDataOut.Store(now + 1)
	}
}

func (a *activity) arrived(pkt []byte, now int64) {
	a.lastIn.Store(now + 1)
	if payloadLen(pkt) > 0 {
		a.firstDataIn.CompareAndSwap(0, now+1)
		a.lastDataIn.Store(now + 1)
	}
}

func (a *activity) snapshot(epoch time.Time) Activity {
	t := func(v *atomic.Int64) time.Time {
		if n := v.Load(); n > 0 {
			return epoch.Add(time.Duration(n - 1))
		}
		return time.Time{}
	}
	return Activity{FirstDataIn: t(&a.firstDataIn), LastDataIn: t(&a.lastDataIn), LastIn: t(&a.lastIn), LastOut: t(&a.lastOut), LastDataOut: t(&a.lastDataOut)}
}

func (a *activity) reset() {
	a.firstDataIn.Store(0)
	a.lastDataIn.Store(0)
	a.lastIn.Store(0)
	a.lastOut.Store(0)
	a.lastDataOut.Store(0)
}

// ResetActivity forgets both directions' activity times (a test marks the
// start of what it measures).
func (l *Link) ResetActivity() {
	for _, d := range l.dirs {
		d.act.reset()
	}
}

// payloadLen is the transport payload of an IPv4/IPv6 packet: TCP data
// after the header and options, a UDP datagram's payload (plus one, so an
// empty datagram still counts as data: QUIC has none); 0 for anything
// else, IPv6 extension headers included (the lab sends none).
func payloadLen(p []byte) int {
	if len(p) == 0 {
		return 0
	}
	var proto byte
	var l4 []byte
	switch p[0] >> 4 {
	case 4:
		if len(p) < 20 {
			return 0
		}
		ihl := int(p[0]&0x0f) * 4
		total := int(p[2])<<8 | int(p[3])
		if ihl < 20 || total > len(p) || ihl > total {
			return 0
		}
		proto, l4 = p[9], p[ihl:total]
	case 6:
		if len(p) < 40 {
			return 0
		}
		plen := int(p[4])<<8 | int(p[5])
		if 40+plen > len(p) {
			return 0
		}
		proto, l4 = p[6], p[40:40+plen]
	default:
		return 0
	}
	switch proto {
	case 6: // TCP
		if len(l4) < 20 {
			return 0
		}
		off := int(l4[12]>>4) * 4
		if off < 20 || off > len(l4) {
			return 0
		}
		return len(l4) - off
	case 17: // UDP
		if len(l4) < 8 {
			return 0
		}
		return len(l4) - 8 + 1
	}
	return 0
}
