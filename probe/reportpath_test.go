package probe_test

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/report"
)

// TestEnvelopeRecordsEveryPathField: a path goes into the envelope
// header through its JSON (probe does not import report); every field,
// nested ones included, arrives, and nothing is dropped.
func TestEnvelopeRecordsEveryPathField(t *testing.T) {
	p := probe.Path{Name: "wlan0", Index: 3, Kind: probe.Kind("wifi"), Up: true, Flags: []string{"up", "multicast"}, MTU: 1500,
		Addrs:        []probe.Addr{{IP: netip.MustParseAddr("198.18.1.2"), PrefixLen: 24, Scope: probe.Scope("global")}},
		DefaultRoute: true,
		DNS:          []probe.DNSServer{{Addr: netip.MustParseAddrPort("198.18.1.1:53"), Source: "dhcp", Shared: true}}}
	h, err := report.NewHeader("run", "p", []probe.Path{p}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := report.Path{Name: "wlan0", Index: 3, Kind: "wifi", Up: true, Flags: []string{"up", "multicast"}, MTU: 1500,
		Addrs:        []report.PathAddr{{IP: netip.MustParseAddr("198.18.1.2"), PrefixLen: 24, Scope: "global"}},
		DefaultRoute: true,
		DNS:          []report.DNSServer{{Addr: netip.MustParseAddrPort("198.18.1.1:53"), Source: "dhcp", Shared: true}}}
	if len(h.Paths) != 1 || !reflect.DeepEqual(h.Paths[0], want) {
		t.Errorf("header paths %+v, want %+v", h.Paths, want)
	}
	// Every field of probe.Path set above: a field added to it and not to
	// report.Path fails NewHeader (unknown field), one left unset here
	// fails this count.
	if n := reflect.TypeOf(p).NumField(); n != 9 {
		t.Errorf("probe.Path has %d fields, this test sets 9: set the new one and add it to report.Path", n)
	}
}

// TestEnvelopeRefusesUnknownPathFields: a path type with a field the
// record lacks is an error, never silently dropped.
func TestEnvelopeRefusesUnknownPathFields(t *testing.T) {
	type wider struct {
		Name  string `json:"name"`
		Extra int    `json:"extra"`
	}
	if _, err := report.NewHeader("run", "p", []wider{{Name: "x", Extra: 1}}, nil); err == nil {
		t.Error("a path with an unknown field was accepted")
	}
}
