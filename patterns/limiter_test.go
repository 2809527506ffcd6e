package patterns

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An IPv6 client is its /64 and an IPv4 client its configured prefix:
// a host rotating through its addresses still gets MaxPerClient sessions.
func TestLimiterClientPrefixes(t *testing.T) {
	l := newLimiter(Limits{MaxSessions: 100, MaxPerClient: 2, ClientPrefix4: 24})
	take := func(a string) (func(), string) { return l.acquire(netip.MustParseAddr(a)) }
	r1, _ := take("fd00:1::1")
	r2, _ := take("fd00:1::ffff:2")
	require.NotNil(t, r1)
	require.NotNil(t, r2)
	r3, reason := take("fd00:1:0:0:abcd::3")
	assert.Nil(t, r3, "a third address of the same /64")
	assert.Contains(t, reason, "fd00:1::/64")
	r4, _ := take("fd00:1:0:1::1")
	assert.NotNil(t, r4, "another /64 is another client")

	a, _ := take("198.18.0.1")
	b, _ := take("::ffff:198.18.0.200")
	c, reason := take("198.18.0.77")
	assert.NotNil(t, a)
	assert.NotNil(t, b)
	assert.Nil(t, c, "a third address of the same /24")
	assert.Contains(t, reason, "198.18.0.0/24")
	r1()
	r1() // released once only
	r5, _ := take("fd00:1::5")
	assert.NotNil(t, r5)
	r6, _ := take("fd00:1::6")
	assert.Nil(t, r6)

	// The default counts single IPv4 addresses.
	d := newLimiter(Limits{MaxPerClient: 1})
	x, _ := d.acquire(netip.MustParseAddr("198.18.0.1"))
	y, _ := d.acquire(netip.MustParseAddr("198.18.0.2"))
	assert.NotNil(t, x)
	assert.NotNil(t, y)
}

// The limiter says when its last session ended (the server then returns
// freed memory), not before, and once a time.
func TestLimiterIdle(t *testing.T) {
	l := newLimiter(Limits{MaxSessions: 4, MaxPerClient: 4})
	idle := 0
	l.onIdle = func() { idle++ }
	a, _ := l.acquire(netip.MustParseAddr("198.18.0.1"))
	b, _ := l.acquire(netip.MustParseAddr("198.18.0.2"))
	a()
	assert.Equal(t, 0, idle, "one session still open")
	b()
	b()
	assert.Equal(t, 1, idle, "the last session ended")
}
