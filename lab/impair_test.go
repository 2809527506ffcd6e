package lab

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseSettings(t *testing.T) {
	c, ic, err := ParseSettings([]string{"delay=10ms block=udp/443,tcp/80", "strip=mptcp-syn", "v6=blackhole", "pmtu=1280,icmp=drop", "quic-interfere=443"})
	if err != nil {
		t.Fatal(err)
	}
	if c.String() != "delay=10ms" {
		t.Errorf("emulator change %q, want delay=10ms", c.String())
	}
	im, err := Impair{}.Apply(ic)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"block=udp/443,tcp/80", "strip=mptcp-syn", "v6=blackhole", "pmtu=1280,icmp=drop", "quic-interfere=443"}
	if got := im.Settings(); !slices.Equal(got, want) {
		t.Errorf("settings %q, want %q", got, want)
	}
	// Settings parse back to the same impairments.
	_, ic2, err := ParseSettings(im.Settings())
	if err != nil {
		t.Fatal(err)
	}
	if im2, _ := (Impair{}).Apply(ic2); !slices.Equal(im2.Settings(), want) {
		t.Errorf("round trip %q, want %q", im2.Settings(), want)
	}
	_, off, err := ParseSettings([]string{"block=off strip=off v6=ok pmtu=off icmp=pass quic-interfere=off"})
	if err != nil {
		t.Fatal(err)
	}
	if cleared, err := im.Apply(off); err != nil || len(cleared.Settings()) != 0 {
		t.Errorf("cleared: %q, %v; want none", cleared.Settings(), err)
	}
	for _, bad := range []string{"block=udp", "block=icmp/1", "block=tcp/0", "strip=tcp", "v6=maybe", "pmtu=100", "icmp=maybe", "quic-interfere=0"} {
		if _, _, err := ParseSettings([]string{bad}); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	for _, bad := range []string{"pmtu=1280", "icmp=drop"} {
		_, ic, err := ParseSettings([]string{bad})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := (Impair{}).Apply(ic); err == nil {
			t.Errorf("%s alone: no error (the lab plants only black holes)", bad)
		}
	}
}

// The rules nft is given parse (nft -c checks them against this kernel
// without applying them).
func TestNftRuleset(t *testing.T) {
	p, _ := Plan("wlan0")
	if _, ok := nftRuleset(p, Impair{PMTU: 1280, ICMPDrop: true}); ok {
		t.Error("an MTU black hole alone needs no nftables table")
	}
	s, ok := nftRuleset(p, Impair{Block: []PortRule{{Proto: "udp", Port: 443}, {Proto: "tcp", Port: 80},
		{Proto: "udp", Port: 443, Prefix: netip.MustParsePrefix("198.18.40.0/24")}, {Proto: "udp", Port: 443, Prefix: netip.MustParsePrefix("fd00:40::/32")}},
		Strip: "mptcp-syn", V6Blackhole: true, QUICInterfere: 443})
	if !ok {
		t.Fatal("no ruleset")
	}
	for _, w := range []string{`iifname "r-wlan0" meta l4proto udp th dport 443 counter drop`,
		`iifname "r-wlan0" ip daddr 198.18.40.0/24 meta l4proto udp th dport 443 counter drop`,
		`iifname "r-wlan0" ip6 daddr fd00:40::/32 meta l4proto udp th dport 443 counter drop`, `reset tcp option mptcp`, `meta nfproto ipv6 counter drop`, `tcp flags & syn == syn`, `udp dport 443 ct original packets > 3 counter drop`} {
		if !strings.Contains(s, w) {
			t.Errorf("ruleset lacks %q:\n%s", w, s)
		}
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft not installed: syntax not checked")
	}
	cmd := exec.Command("nft", "-c", "-f", "-")
	cmd.Stdin = strings.NewReader(s)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("nft -c: %v: %s\n%s", err, out, s)
	}
}

// block= may name a destination prefix per proto/port: lab up, lab set,
// timelines and sweep cells all read it; the setting round-trips, the
// truth's rules carry the prefix, and a bad prefix is named.
func TestParseBlockPrefix(t *testing.T) {
	const set = "block=udp/443@198.18.40.0/24,udp/443@FD00:40::/32,tcp/80,udp/443@198.19.0.1"
	_, ic, err := ParseSettings([]string{set})
	if err != nil {
		t.Fatal(err)
	}
	im, err := Impair{}.Apply(ic)
	if err != nil {
		t.Fatal(err)
	}
	want := "block=udp/443@198.18.40.0/24,udp/443@fd00:40::/32,tcp/80,udp/443@198.19.0.1/32"
	if got := im.Settings(); !slices.Equal(got, []string{want}) {
		t.Errorf("settings %q, want %q", got, want)
	}
	if im.Block[0].Prefix != netip.MustParsePrefix("198.18.40.0/24") || im.Block[2].Prefix.IsValid() {
		t.Errorf("rules %+v", im.Block)
	}
	p, _ := Plan("wlan0")
	tr := impairTruth(p, "ns", im, nil, time.Time{})
	if len(tr) != 1 || !slices.Equal(tr[0].Rules, im.Block) || tr[0].Setting != want {
		t.Errorf("truth %+v", tr)
	}
	b, _ := json.Marshal(tr[0].Rules[:3])
	if string(b) != `[{"proto":"udp","port":443,"prefix":"198.18.40.0/24"},{"proto":"udp","port":443,"prefix":"fd00:40::/32"},{"proto":"tcp","port":80}]` {
		t.Errorf("truth rules JSON %s", b)
	}
	if ev, err := ParseTimeline(strings.NewReader("t=1s wlan0 " + set + "\n")); err != nil || len(ev) != 1 || !slices.Equal(ev[0].Extra, []string{set}) {
		t.Errorf("timeline: %+v, %v", ev, err)
	}
	if c, err := ParseImpairSetting(set); err != nil || c.Block == nil || len(*c.Block) != 4 {
		t.Errorf("sweep cell: %+v, %v", c, err)
	}
	for bad, says := range map[string]string{
		"block=udp/443@198.18.40.1/24": "host bits set (the prefix is 198.18.40.0/24)",
		"block=udp/443@nowhere":        "want a destination prefix",
		"block=udp/443@":               "want a destination prefix",
		"block=udp@198.18.40.0/24":     "want block=PROTO/PORT",
	} {
		if _, _, err := ParseSettings([]string{bad}); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: error %v, want one saying %q", bad, err, says)
		}
	}
}

func TestParseTimelineImpairments(t *testing.T) {
	ev, err := ParseTimeline(strings.NewReader("t=0 wlan0 block=udp/443 delay=5ms\nt=2s wwan0 pmtu=1280,icmp=drop\nt=3s wlan0 block=off\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ev) != 3 || !slices.Equal(ev[0].Extra, []string{"block=udp/443"}) || ev[0].Change.String() != "delay=5ms" ||
		!slices.Equal(ev[1].Extra, []string{"pmtu=1280,icmp=drop"}) || !ev[1].Change.IsZero() {
		t.Errorf("events %+v", ev)
	}
	for _, bad := range []string{"t=0 wlan0 block=icmp/1", "t=0 wlan0 delay=abc", "t=0 wlan0 strip=tcp"} {
		if _, err := ParseTimeline(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("%q: error %v, want one naming line 1", bad, err)
		}
	}
}

// cgnat is a bare build setting like nat64; the two compose (the
// translator's IPv4 side behind the CGNAT), and a sweep cell cannot set
// it.
func TestParseCGNAT(t *testing.T) {
	_, ic, err := ParseSettings([]string{"cgnat delay=5ms"})
	if err != nil || ic.CGNAT == nil || !*ic.CGNAT {
		t.Fatalf("cgnat: %+v, %v", ic, err)
	}
	im, err := Impair{}.Apply(ic)
	if err != nil || !slices.Equal(im.Settings(), []string{"cgnat"}) {
		t.Errorf("settings %q, %v; want cgnat", im.Settings(), err)
	}
	_, both, _ := ParseSettings([]string{"nat64 cgnat"})
	if im, err := (Impair{}).Apply(both); err != nil || !slices.Equal(im.Settings(), []string{"nat64", "cgnat"}) {
		t.Errorf("nat64 with cgnat: %q, %v", im.Settings(), err)
	}
	_, hidden, err := ParseSettings([]string{"nat64=no-rfc7050 cgnat"})
	if im, aerr := (Impair{}).Apply(hidden); err != nil || aerr != nil || !slices.Equal(im.Settings(), []string{"nat64=no-rfc7050", "cgnat"}) || !im.NAT64 {
		t.Errorf("nat64=no-rfc7050 cgnat: %q, %v, %v", im.Settings(), err, aerr)
	}
	if _, err := ParseTimeline(strings.NewReader("t=1s wwan0 nat64=no-rfc7050\n")); err == nil {
		t.Error("timeline step nat64=no-rfc7050: no error")
	}
	if _, err := ParseImpairSetting("cgnat"); err == nil {
		t.Error("sweep cell cgnat: no error")
	}
	if _, err := ParseTimeline(strings.NewReader("t=1s wwan0 cgnat\n")); err == nil {
		t.Error("timeline step cgnat: no error")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft not installed: syntax not checked")
	}
	p, _ := Plan("wwan0")
	for _, nat64 := range []bool{false, true} {
		cmd := exec.Command("nft", "-c", "-f", "-")
		cmd.Stdin = strings.NewReader(cgnatRuleset(p, nat64))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("nft -c (nat64 %v): %v: %s\n%s", nat64, err, out, cgnatRuleset(p, nat64))
		}
	}
}

func TestParsePortal(t *testing.T) {
	for _, tok := range []string{"portal", "portal=on"} {
		_, ic, err := ParseSettings([]string{tok})
		if err != nil || ic.Portal == nil || !*ic.Portal {
			t.Errorf("%s: %+v, %v", tok, ic, err)
		}
	}
	_, off, err := ParseSettings([]string{"portal=off"})
	if err != nil || off.Portal == nil || *off.Portal {
		t.Errorf("portal=off: %+v, %v", off, err)
	}
	if _, _, err := ParseSettings([]string{"portal=maybe"}); err == nil {
		t.Error("portal=maybe: no error")
	}
	if ic, err := ParseImpairSetting("block=udp/443"); err != nil || ic.Portal == nil || *ic.Portal {
		t.Errorf("a sweep cell without portal does not clear it: %+v, %v", ic, err)
	}
	p, _ := Plan("wlan0")
	s, ok := nftRuleset(p, Impair{Portal: true})
	if !ok || !strings.Contains(s, "type nat hook prerouting") || !strings.Contains(s, fmt.Sprintf("tcp dport 443 counter redirect to :%d", PortPortalHTTPS)) {
		t.Fatalf("portal ruleset:\n%s", s)
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft not installed: syntax not checked")
	}
	cmd := exec.Command("nft", "-c", "-f", "-")
	cmd.Stdin = strings.NewReader(s)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("nft -c: %v: %s\n%s", err, out, s)
	}
}
