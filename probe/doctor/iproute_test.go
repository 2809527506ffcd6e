package doctor

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseLimits(t *testing.T) {
	for in, want := range map[string]mptcpLimitsJSON{
		"add_addr_accepted 0 subflows 2 \n":        {Subflows: 2},
		`{"add_addr_accepted":4,"subflows":8}`:     {Subflows: 8, AddAddrAccepted: 4},
		"subflows 3 add_addr_accepted 1 extra 7\n": {Subflows: 3, AddAddrAccepted: 1},
	} {
		got, err := parseLimits([]byte(in))
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "subflows many", "{", "hello world"} {
		_, err := parseLimits([]byte(bad))
		assert.Error(t, err, bad)
	}
}

func TestRuleMatches(t *testing.T) {
	n := func(i int) *int { return &i }
	ip := netip.MustParseAddr("198.18.2.2")
	assert.True(t, ruleJSON{Src: "all"}.matches(ip))
	assert.True(t, ruleJSON{Src: "198.18.2.2"}.matches(ip))
	assert.True(t, ruleJSON{Src: "198.18.0.0", SrcLen: n(15)}.matches(ip))
	assert.False(t, ruleJSON{Src: "198.18.2.3"}.matches(ip))
	assert.False(t, ruleJSON{Src: "fd00::", SrcLen: n(8)}.matches(ip))
	assert.False(t, ruleJSON{Src: "junk"}.matches(ip))
	assert.False(t, ruleJSON{Src: "198.18.0.0", SrcLen: n(99)}.matches(ip))
}

func TestParseRulesGenerality(t *testing.T) {
	rules, err := parseRules([]byte(`[{"priority":32765,"not":null,"src":"198.18.0.0","srclen":16,"table":"7"},` +
		`{"priority":60,"src":"all","iif":"lo","table":"9"},{"priority":10,"src":"all","table":"main","suppress_prefixlen":0}]`))
	require.NoError(t, err)
	require.Len(t, rules, 3)
	assert.Equal(t, []int{10, 60, 32765}, []int{rules[0].Priority, rules[1].Priority, rules[2].Priority})
	assert.True(t, rules[0].general)
	assert.False(t, rules[1].general, "iif selects on a device")
	assert.False(t, rules[2].general, "not inverts the selector")
}

// FuzzIPRoute2 feeds arbitrary `ip -j` output to every decoder and the
// rule walk: errors are fine, panics are not.
func FuzzIPRoute2(f *testing.F) {
	for _, s := range []string{
		`[{"address":"198.18.2.2","id":1,"subflow":true,"dev":"wwan0"}]`,
		"add_addr_accepted 0 subflows 2 \n",
		`{"add_addr_accepted":4,"subflows":8}`,
		`[{"priority":0,"src":"all","table":"local"},{"priority":50,"src":"198.18.3.0","srclen":24,"action":"unreachable"},{"priority":100,"src":"all","table":"main","suppress_prefixlen":0}]`,
		`[{"dst":"default","gateway":"198.18.2.1","dev":"wwan0","table":"102","flags":[]},{"dst":"default","metric":5,"nexthops":[{"gateway":"198.18.1.1","dev":"wlan0"}]}]`,
		`[{"priority":1,"src":"198.18.0.0","srclen":-1,"table":"main"}]`,
		"", "null", "[null]", "[{}]",
	} {
		f.Add(s)
	}
	src := netip.MustParseAddr("198.18.2.2")
	f.Fuzz(func(t *testing.T, s string) {
		b := []byte(s)
		_, _ = ParseEndpoints(b)
		_, _ = parseLimits(b)
		rules, _ := parseRules(b)
		routes, _ := parseRoutes(b)
		_ = lookupSource(rules, routes, src)
		_ = gateway(routes, "wwan0")
		_ = hasDefault(routes, "main", "wwan0")
	})
}
