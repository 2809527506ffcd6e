package sweep

import (
	"errors"
	"strings"
	"testing"
)

// TestParseImpair: a sweep file's per-path impairments are a grid
// dimension, checked at load (errors name the field), part of each cell's
// key; a grid without them keeps its fingerprint.
func TestParseImpair(t *testing.T) {
	base := "sizes: [128KiB]\ntransports: [mptcp]\nprimaries: [wlan0]\nrepetitions: 1\n"
	s, err := Parse([]byte(base + "paths:\n  wwan0:\n    rtt: [20ms]\n    impair: ['', 'strip=mptcp', 'block=udp/443 v6=blackhole']\n"))
	if err != nil {
		t.Fatal(err)
	}
	cells := s.Cells()
	if len(cells) != 3 {
		t.Fatalf("%d cells, want 3", len(cells))
	}
	var got []string
	keys := map[string]bool{}
	for _, c := range cells {
		got = append(got, c.Paths[1].Impair)
		keys[c.Key()] = true
		if c.Paths[0].Impair != "" {
			t.Errorf("wlan0 impaired: %+v", c.Paths[0])
		}
	}
	if strings.Join(got, "|") != "|strip=mptcp|block=udp/443 v6=blackhole" || len(keys) != 3 {
		t.Errorf("impairments %q, %d distinct keys", got, len(keys))
	}
	// A block towards some prefixes only is its own cell.
	scoped, err := Parse([]byte(base + "paths:\n  wwan0:\n    impair: ['block=udp/443', 'block=udp/443@198.19.0.0/24,udp/443@fd00:ff::/80']\n"))
	if err != nil || len(scoped.Cells()) != 2 || scoped.Cells()[0].Key() == scoped.Cells()[1].Key() {
		t.Errorf("scoped block cells: %v", err)
	}
	// The summaries name each cell's impairment (text and CSV).
	var sums []CellSummary
	for _, c := range cells {
		sums = append(sums, CellSummary{Cell: c})
	}
	var txt, csvb strings.Builder
	if err := WriteText(&txt, sums); err != nil {
		t.Fatal(err)
	}
	if err := WriteCSV(&csvb, sums); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"impairments", "  -\n", "wwan0:strip=mptcp\n", "wwan0:block=udp/443 v6=blackhole\n"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text table lacks %q:\n%s", want, txt.String())
		}
	}
	if !strings.Contains(csvb.String(), ",wlan0_impair,wwan0_impair\n") || !strings.Contains(csvb.String(), ",,strip=mptcp\n") {
		t.Errorf("csv lacks the impairment columns:\n%s", csvb.String())
	}
	clean, err := Parse([]byte(base + "paths:\n  wwan0:\n    rtt: [20ms]\n"))
	if err != nil {
		t.Fatal(err)
	}
	noImp, err := Parse([]byte(base + "paths:\n  wwan0:\n    rtt: [20ms]\n    impair: ['']\n"))
	if err != nil {
		t.Fatal(err)
	}
	if clean.Fingerprint() != noImp.Fingerprint() || clean.Fingerprint() == s.Fingerprint() {
		t.Errorf("fingerprints: clean %s, impair [''] %s, impaired %s", clean.Fingerprint(), noImp.Fingerprint(), s.Fingerprint())
	}
	for _, bad := range []struct{ val, field, msg string }{
		{"'delay=10ms'", "paths.wwan0.impair[0]", "not emulator parameters"},
		{"'nat64'", "paths.wwan0.impair[0]", "how a path is built"},
		{"'block=udp/99999'", "paths.wwan0.impair[0]", ""},
		{"'pmtu=1280'", "paths.wwan0.impair[0]", "icmp=drop"},
		{"['', strip=mptcp, strip=mptcp]", "paths.wwan0.impair[2]", "twice"},
		{"['', none]", "paths.wwan0.impair[1]", "twice"},
		{"['strip=mptcp block=udp/443', 'block=udp/443 strip=mptcp']", "paths.wwan0.impair[1]", "twice"},
		{"['', 'block=udp/443@198.19.0.1/16']", "paths.wwan0.impair[1]", "host bits set"},
		{"['block=udp/443@198.19.0.0/24', 'block=udp/443@198.19.0.0/24']", "paths.wwan0.impair[1]", "twice"},
	} {
		v := bad.val
		if !strings.HasPrefix(v, "[") {
			v = "[" + v + "]"
		}
		_, err := Parse([]byte(base + "paths:\n  wwan0:\n    impair: " + v + "\n"))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != bad.field || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("impair %s: %v, want a FieldError on %s saying %q", bad.val, err, bad.field, bad.msg)
		}
	}
}
