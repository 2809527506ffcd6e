package world

import (
	"bytes"
	"encoding/json"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func mustGenerate(t testing.TB, o Options) *World {
	t.Helper()
	w, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func jsonOf(t testing.TB, w *World) []byte {
	t.Helper()
	b, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGenerateDeterministic(t *testing.T) {
	a := jsonOf(t, mustGenerate(t, Options{Seed: 7, Domains: 500}))
	b := jsonOf(t, mustGenerate(t, Options{Seed: 7, Domains: 500}))
	if !bytes.Equal(a, b) {
		t.Fatal("same seed, different worlds")
	}
	c := jsonOf(t, mustGenerate(t, Options{Seed: 8, Domains: 500}))
	if bytes.Equal(a, c) {
		t.Fatal("different seeds, same world")
	}
}

func TestGenerateShapes(t *testing.T) {
	const n = 2000
	w := mustGenerate(t, Options{Seed: 1, Domains: n})
	if w.Paths != DefaultPaths || w.BaseDelay["wlan0"].Milliseconds() != 10 || w.BaseDelay["wwan0"].Milliseconds() != 30 {
		t.Fatalf("defaults: %v %v", w.Paths, w.BaseDelay)
	}
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	cnames := 0
	for i, d := range w.Domains {
		count[d.Category]++
		if d.Rank != i+1 {
			t.Fatalf("rank %d at %d", d.Rank, i)
		}
		if len(d.Views[0].CNAMEs) > 0 {
			cnames++
		}
	}
	s := DefaultShares()
	for cat, share := range map[string]float64{
		CatDiffer: s.Differ, CatOnePath: s.OnePath, CatNXDomain: s.NXDomain, CatServFail: s.ServFail,
		CatTimeout: s.Timeout, CatNoAnswer: s.NoAnswer, CatLarge: s.Large, CatPrivate: s.Private,
	} {
		if want := int(math.Round(share * n)); count[cat] != want {
			t.Errorf("%s: %d domains, want %d", cat, count[cat], want)
		}
	}
	if want := int(math.Round(s.CNAME * n)); cnames != want {
		t.Errorf("CNAME chains: %d, want %d", cnames, want)
	}
	// Every address is in the plan and private exactly in the private prefixes.
	unreach := map[string]int{}
	for a, tg := range w.Targets {
		if !InPlan(a) || tg.Addr != a || tg.Private != IsPrivate(a) {
			t.Fatalf("target %s: %+v", a, tg)
		}
		b := a.As16()
		if a.Is4() && (b[15] == 0 || b[15] == 255) {
			t.Errorf("target %s ends in .0 or .255", a)
		}
		for _, p := range tg.UnreachableFrom {
			unreach[p]++
		}
	}
	if unreach["wlan0"] == 0 || unreach["wwan0"] == 0 {
		t.Errorf("no unreachable targets per path: %v", unreach)
	}
	// Private answers: on one path only, and that path can reach them.
	for _, d := range w.Domains {
		if d.Category != CatPrivate {
			continue
		}
		np := 0
		for _, v := range d.Views {
			for _, a := range append(append([]netip.Addr{}, v.A...), v.AAAA...) {
				if w.Targets[a].Private {
					np++
					if !w.Targets[a].Reachable(v.Path) {
						t.Errorf("%s: private %s unreachable from its own path %s", d.Name, a, v.Path)
					}
				}
			}
		}
		if np == 0 {
			t.Errorf("%s: private category without private address", d.Name)
		}
	}
	// Expected summary looks like 004: WL has the most unresponsive targets.
	tr, err := w.Truth(ExpectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cells := tr.Summary.Cells
	if !(cells[1].UnresponsivePct > cells[0].UnresponsivePct) || cells[0].Targets == 0 {
		t.Errorf("WL unresponsive %.2f%% not above WW %.2f%%", cells[1].UnresponsivePct, cells[0].UnresponsivePct)
	}
	if o := tr.Summary.Overlap; o.OverlapPct < 40 || o.OverlapPct > 85 {
		t.Errorf("overlap %.1f%% far from 004's 58.74%%", o.OverlapPct)
	}
	if len(tr.Summary.Skipped) != 2 {
		t.Errorf("skipped: %+v, want cross-path private on WL and LW", tr.Summary.Skipped)
	}
}

func TestGenerateSmallAndErrors(t *testing.T) {
	w := mustGenerate(t, Options{Seed: 3, Domains: 20})
	seen := map[string]bool{}
	for _, d := range w.Domains {
		seen[d.Category] = true
	}
	for _, c := range []string{CatSame, CatDiffer, CatOnePath, CatNXDomain, CatServFail, CatTimeout, CatNoAnswer, CatLarge, CatPrivate} {
		if !seen[c] {
			t.Errorf("20 domains: no %s domain", c)
		}
	}
	if w := mustGenerate(t, Options{Domains: 0}); len(w.Domains) != 0 {
		t.Error("0 domains")
	}
	for _, o := range []Options{
		{Domains: -1},
		{Domains: 10, Shares: Shares{Differ: 0.9, NXDomain: 0.2}},
		{Domains: 10, Shares: Shares{Differ: -0.1}},
		{Domains: 10, Shares: Shares{Dead: math.NaN()}},
		{Domains: 10, Paths: [2]string{"a", "a"}},
		{Domains: 10, Paths: [2]string{"a", ""}},
	} {
		if _, err := Generate(o); err == nil {
			t.Errorf("Generate(%+v): no error", o)
		}
	}
	// Custom paths get custom default delays and views.
	w = mustGenerate(t, Options{Domains: 30, Paths: [2]string{"eth0", "eth1"}})
	if w.Domains[0].View("eth1") == nil || w.BaseDelay["eth0"] == 0 {
		t.Error("custom paths not used")
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	w := mustGenerate(t, Options{Seed: 11, Domains: 300})
	p := filepath.Join(t.TempDir(), "world.json")
	if err := w.Save(p); err != nil {
		t.Fatal(err)
	}
	l, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(jsonOf(t, w), jsonOf(t, l)) {
		t.Fatal("loaded world differs")
	}
	t1, _ := w.Truth(ExpectOptions{})
	t2, _ := l.Truth(ExpectOptions{})
	if d := diff(t1, t2); d != "" {
		t.Fatalf("truth of loaded world differs at %s", d)
	}
	tp := filepath.Join(t.TempDir(), "truth.json")
	if err := t1.Write(tp); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(tp)
	var back Truth
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if d := diff(t1, &back); d != "" {
		t.Fatalf("truth.json round trip differs at %s", d)
	}
	var tr bytes.Buffer
	if err := w.WriteTranco(&tr); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(tr.String()), "\n")
	if len(lines) != 300 || lines[0] != "1,"+w.Domains[0].Name || lines[299] != "300,"+w.Domains[299].Name {
		t.Fatalf("tranco: %d lines, first %q", len(lines), lines[0])
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Fatal("missing file loaded")
	}
}

const handJSON = `{"options":{"seed":0,"domains":1,"paths":["wlan0","wwan0"],"shares":{},"base_delay_ns":{"wlan0":10000000}},
"domains":[{"rank":1,"name":"a1.example","category":"same","views":[
 {"path":"wwan0","status":"NOERROR","a":["198.19.0.1"]},
 {"path":"wlan0","status":"NOERROR","a":["198.19.0.1"]}]}],
"targets":{"198.19.0.1":{"extra_delay_ns":5000000}}}`

func TestParse(t *testing.T) {
	w, err := Parse([]byte(handJSON))
	if err != nil {
		t.Fatal(err)
	}
	if w.Domains[0].Views[0].Path != "wlan0" || w.Targets[netip.MustParseAddr("198.19.0.1")].Addr.String() != "198.19.0.1" {
		t.Errorf("views not reordered or target address not filled: %+v", w.Domains[0])
	}
	bad := map[string]string{
		"garbage":         `{`,
		"trailing":        handJSON + `{}`,
		"unknown field":   strings.Replace(handJSON, `"seed"`, `"sed"`, 1),
		"outside plan":    strings.ReplaceAll(handJSON, "198.19.0.1", "8.8.8.8"),
		"wrong family":    strings.Replace(handJSON, `"a":["198.19.0.1"]}]`, `"aaaa":["198.19.0.1"]}]`, 1),
		"no target":       strings.Replace(handJSON, `"198.19.0.1":{`, `"198.19.0.2":{`, 1),
		"bad status":      strings.Replace(handJSON, `"NOERROR"`, `"OK"`, 1),
		"records on fail": strings.Replace(handJSON, `"NOERROR"`, `"NXDOMAIN"`, 1),
		"outside zone":    strings.Replace(handJSON, "a1.example", "a1.com", 1),
		"bad name":        strings.Replace(handJSON, "a1.example", "a 1.example", 1),
		"one view":        strings.Replace(handJSON, `{"path":"wwan0","status":"NOERROR","a":["198.19.0.1"]},`, ``, 1),
		"same paths":      strings.Replace(handJSON, `["wlan0","wwan0"]`, `["wlan0","wlan0"]`, 1),
		"delay path":      strings.Replace(handJSON, `{"wlan0":10000000}`, `{"eth9":1}`, 1),
		"negative delay":  strings.Replace(handJSON, `"extra_delay_ns":5000000`, `"extra_delay_ns":-5`, 1),
		"cname loop":      strings.Replace(handJSON, `{"path":"wlan0","status":"NOERROR",`, `{"path":"wlan0","status":"NOERROR","cnames":["a1.example"],`, 1),
		"null target":     strings.Replace(handJSON, `{"extra_delay_ns":5000000}`, `null`, 1),
	}
	for name, in := range bad {
		if _, err := Parse([]byte(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(handJSON))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"options":{"paths":["a","b"]},"domains":[{"name":"x.example","views":[{"path":"a","status":"TIMEOUT"},{"path":"b","status":"NOERROR","cnames":["y.example"]}]}]}`))
	f.Add(jsonOf(f, mustGenerate(f, Options{Seed: 1, Domains: 25})))
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := Parse(b)
		if err != nil {
			return
		}
		// A valid world must be servable and summarisable without panics.
		for _, p := range w.Paths {
			if _, err := w.DNSHandler(p); err != nil {
				t.Fatalf("valid world, handler: %v", err)
			}
		}
		if _, err := w.Truth(ExpectOptions{}); err != nil {
			t.Fatalf("valid world, truth: %v", err)
		}
	})
}
