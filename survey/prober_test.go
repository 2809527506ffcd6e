package survey

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A reply is an answer only if it arrived within the timeout of its own
// send, however late Result is called.
func TestReplyPendingDeadline(t *testing.T) {
	sent := time.Now().Add(-time.Second)
	mk := func(at time.Time) *replyPending {
		d := newDemux[int]()
		w, _ := d.register(1, func(any) (AnswerKind, bool) { return AnswerSynAck, true })
		d.deliver(1, nil, at)
		return &replyPending{w: w, sent: sent, bytes: 44, done: func() { d.unregister(1) }}
	}
	r := mk(sent.Add(30*time.Millisecond)).Result(context.Background(), sent.Add(100*time.Millisecond))
	assert.Equal(t, AnswerSynAck, r.Kind)
	assert.Equal(t, 30*time.Millisecond, r.RTT)
	assert.Equal(t, 44, r.Bytes)

	r = mk(sent.Add(150*time.Millisecond)).Result(context.Background(), sent.Add(100*time.Millisecond))
	assert.Equal(t, AnswerNone, r.Kind)
	assert.Equal(t, ProbeTimeout, r.Status)

	// No reply: waits until the deadline, not longer.
	d := newDemux[int]()
	w, _ := d.register(2, func(any) (AnswerKind, bool) { return AnswerRST, true })
	p := &replyPending{w: w, sent: time.Now(), done: func() { d.unregister(2) }}
	start := time.Now()
	r = p.Result(context.Background(), start.Add(50*time.Millisecond))
	assert.Equal(t, ProbeTimeout, r.Status)
	assert.Less(t, time.Since(start), time.Second)
	assert.Empty(t, d.waiters, "waiter released")

	// A cancelled run reports cancelled.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w, _ = d.register(3, func(any) (AnswerKind, bool) { return AnswerRST, true })
	r = (&replyPending{w: w, sent: time.Now(), done: func() { d.unregister(3) }}).Result(ctx, time.Now().Add(time.Hour))
	assert.Equal(t, ProbeCancelled, r.Status)
}

func TestClassifyErr(t *testing.T) {
	assert.Equal(t, ProbeSuccess, classifyErr(nil))
	assert.Equal(t, ProbeTimeout, classifyErr(context.DeadlineExceeded))
	assert.Equal(t, ProbeCancelled, classifyErr(context.Canceled))
}
