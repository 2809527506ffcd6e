package world

import (
	"strings"
	"testing"
)

func TestParseShares(t *testing.T) {
	s, err := ParseShares("")
	if err != nil || s != DefaultShares() {
		t.Fatalf("empty: %+v %v", s, err)
	}
	s, err = ParseShares(" differ=0.3, timeout=0 ,carrier_nat=0.1")
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultShares()
	want.Differ, want.Timeout, want.CarrierNAT = 0.3, 0, 0.1
	if s != want {
		t.Fatalf("got %+v, want %+v", s, want)
	}
	back, err := ParseShares(s.String())
	if err != nil || back != s {
		t.Fatalf("String round trip: %q -> %+v %v", s.String(), back, err)
	}
	for _, bad := range []string{"differ", "differ=x", "differ=1.5", "differ=-0.1", "differ=NaN", "nope=0.1", "differ=0.1,,"} {
		if _, err := ParseShares(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if _, err := ParseShares("zzz=1"); err == nil || !strings.Contains(err.Error(), "carrier_nat") {
		t.Errorf("unknown name error does not list the names: %v", err)
	}
}

func FuzzParseShares(f *testing.F) {
	f.Add("differ=0.3,timeout=0")
	f.Add(DefaultShares().String())
	f.Add("=,=")
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := ParseShares(spec)
		if err != nil {
			return
		}
		if back, err := ParseShares(s.String()); err != nil || back != s {
			t.Fatalf("round trip of %q: %+v %v", spec, back, err)
		}
	})
}
