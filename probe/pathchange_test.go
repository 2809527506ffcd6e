package probe

import (
	"net/netip"
	"testing"
)

func TestPathChanges(t *testing.T) {
	addr := func(s string, sc Scope) Addr { return Addr{IP: netip.MustParseAddr(s), Scope: sc} }
	wlan := Path{Name: "wlan0", Up: true, DefaultRoute: true, Addrs: []Addr{addr("198.18.1.2", ScopeGlobal), addr("fe80::1", ScopeLinkLocal)}}
	wwan := Path{Name: "wwan0", Up: true, Addrs: []Addr{addr("198.18.2.2", ScopeGlobal)}}
	eth := Path{Name: "eth0", Up: true, DefaultRoute: true, Addrs: []Addr{addr("198.18.3.2", ScopeGlobal)}}
	lladdr := wlan
	lladdr.Addrs = []Addr{addr("198.18.1.2", ScopeGlobal), addr("fe80::2", ScopeLinkLocal)}
	moved := wlan
	moved.Addrs = []Addr{addr("198.18.1.3", ScopeGlobal)}
	down := wwan
	down.Up = false
	for _, c := range []struct {
		name        string
		before, now []Path
		watch       []string
		defaults    bool
		want        string
	}{
		{"same", []Path{wlan, wwan}, []Path{wwan, wlan}, []string{"wlan0", "wwan0"}, true, ""},
		{"link-local only", []Path{wlan}, []Path{lladdr}, []string{"wlan0"}, true, ""},
		{"address", []Path{wlan}, []Path{moved}, []string{"wlan0"}, false, "wlan0: addresses changed from [198.18.1.2] to [198.18.1.3]"},
		{"down", []Path{wwan}, []Path{down}, []string{"wwan0"}, false, "wwan0: interface went down"},
		{"up", []Path{down}, []Path{wwan}, []string{"wwan0"}, false, "wwan0: interface came up"},
		{"gone", []Path{wlan, wwan}, []Path{wlan}, []string{"wwan0"}, false, "wwan0: interface disappeared"},
		{"default route appears", []Path{wwan}, []Path{wwan, eth}, []string{"wwan0"}, true, "eth0: interface appeared"},
		{"unwatched appears", []Path{wwan}, []Path{wwan, eth}, []string{"wwan0"}, false, ""},
		{"unwatched changes", []Path{wwan, wlan}, []Path{wwan, moved}, []string{"wwan0"}, false, ""},
	} {
		got := ""
		if ch := PathChanges(c.before, c.now, c.watch, c.defaults); len(ch) > 0 {
			got = ch[0].String()
			if len(ch) > 1 {
				t.Errorf("%s: %d changes %v, want one", c.name, len(ch), ch)
			}
		}
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
