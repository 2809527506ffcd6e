package rawprobe

import (
	"context"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A reply finds its probe by the slot index in its acknowledgment number
// and is taken only if address, ports and token match the slot's; the
// verdict of an unanswered probe waits for the receive loop's watermark,
// and past MaxVerdictWait it is a timeout the host may have caused.
func TestRawSlots(t *testing.T) {
	rp := &rawProber{codec: &synCodec{}}
	woken := 0
	rp.OnAnswer(func() { woken++ })
	s := &rawSock{src: netip.MustParseAddr("198.18.0.2")}
	dst := netip.MustParseAddr("198.19.1.7")
	sent := time.Now()
	probeOf := func(cookie uint64) (uint32, []byte) {
		rp.mu.Lock()
		defer rp.mu.Unlock()
		idx, ok := rp.alloc(s, dst, 443, cookie, nil)
		require.True(t, ok)
		rp.slots[idx].sent = sent.UnixNano()
		return idx, rp.codec.build(nil, s.src, &rp.slots[idx], idx)
	}
	// reply answers syn with flags, acknowledging seq+1+ackOff.
	reply := func(syn []byte, flags uint8, ackOff uint32) []byte {
		h, ok := parseTCP(syn)
		require.True(t, ok)
		b := appendSYN(nil, dst, s.src, h.dport, h.sport, 0)
		binary.BigEndian.PutUint32(b[8:], binary.BigEndian.Uint32(syn[4:])+1+ackOff)
		b[13] = flags
		return b
	}
	idx, syn := probeOf(7)
	at := sent.Add(30 * time.Millisecond)
	rp.deliver(s, reply(syn, tcpSYN|tcpACK, 1<<16), dst, at) // wrong token
	rp.deliver(s, reply(syn, tcpSYN|tcpACK, 0), netip.MustParseAddr("198.19.1.8"), at)
	rp.deliver(s, reply(syn, tcpSYN, 0), dst, at) // no ACK
	assert.Empty(t, rp.Answered(nil))
	rp.deliver(s, reply(syn, tcpSYN|tcpACK, 0), dst, at)
	rp.deliver(s, reply(syn, tcpRST|tcpACK, 0), dst, at.Add(time.Millisecond)) // a duplicate
	got := rp.Answered(nil)
	require.Len(t, got, 1)
	assert.Equal(t, Answer{Cookie: 7, Sent: time.Unix(0, sent.UnixNano()), At: time.Unix(0, at.UnixNano()), Kind: AnswerSynAck, Bytes: 44 + 40}, got[0])
	assert.Equal(t, 1, woken)
	assert.Equal(t, []uint32{idx}, rp.free, "slot released")

	// No answer: the verdict waits for the watermark to pass the deadline.
	idx, _ = probeOf(8)
	deadline := sent.Add(time.Second)
	s.watermark.Store(deadline.Add(-time.Millisecond).UnixNano())
	_, final := rp.Expire(idx, deadline, deadline.Add(time.Second))
	assert.False(t, final, "the receive loop has not read up to the deadline")
	s.watermark.Store(deadline.UnixNano())
	res, final := rp.Expire(idx, deadline, deadline.Add(time.Second))
	assert.True(t, final)
	assert.Equal(t, Result{Status: ProbeTimeout, Err: context.DeadlineExceeded, Bytes: 44}, res)
	idx, _ = probeOf(9)
	res, final = rp.Expire(idx, deadline.Add(time.Hour), deadline.Add(time.Hour+MaxVerdictWait))
	assert.True(t, final)
	assert.True(t, res.HostSuspect, "the receive loop never caught up")

	// ICMP: identifier, sequence number (slot) and token (data).
	ic := icmpCodec{id: 0x4242}
	sl := rawSlot{dst: dst, token: 0xef01}
	b := ic.build(nil, s.src, &sl, 513)
	b[0] = icmp4EchoReply
	i, token, _, _, kind, ok := ic.match(b, false)
	assert.True(t, ok)
	assert.Equal(t, [2]uint32{513, 0xef01}, [2]uint32{i, token})
	assert.Equal(t, AnswerEchoReply, kind)
	_, _, _, _, _, ok = icmpCodec{id: 1}.match(b, false)
	assert.False(t, ok, "another pinger's reply")
}

func TestClassifyErr(t *testing.T) {
	assert.Equal(t, ProbeSuccess, classifyErr(nil))
	assert.Equal(t, ProbeTimeout, classifyErr(context.DeadlineExceeded))
	assert.Equal(t, ProbeCancelled, classifyErr(context.Canceled))
}
