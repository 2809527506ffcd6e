package world

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// fields names the fields of Shares as ParseShares and String spell them
// (the JSON names).
func (s *Shares) fields() []struct {
	name string
	v    *float64
} {
	return []struct {
		name string
		v    *float64
	}{
		{"differ", &s.Differ}, {"onepath", &s.OnePath}, {"nxdomain", &s.NXDomain},
		{"servfail", &s.ServFail}, {"timeout", &s.Timeout}, {"noanswer", &s.NoAnswer},
		{"large", &s.Large}, {"private", &s.Private}, {"cname", &s.CNAME},
		{"dead", &s.Dead}, {"carrier_nat", &s.CarrierNAT},
		{"first_path_block", &s.FirstPathBlock}, {"second_path_block", &s.SecondPathBlock},
		{"first_path_v6_block", &s.FirstPathV6Block},
	}
}

// ParseShares reads a comma-separated list of name=fraction overriding
// DefaultShares, e.g. "differ=0.3,timeout=0" (for a --shares flag). Names
// are the JSON names of Shares; fractions are in [0,1]. An empty spec
// gives DefaultShares.
func ParseShares(spec string) (Shares, error) {
	s := DefaultShares()
	if strings.TrimSpace(spec) == "" {
		return s, nil
	}
	for _, kv := range strings.Split(spec, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return Shares{}, fmt.Errorf("shares: %q is not name=fraction", kv)
		}
		var field *float64
		var names []string
		for _, f := range s.fields() {
			names = append(names, f.name)
			if f.name == strings.TrimSpace(name) {
				field = f.v
			}
		}
		if field == nil {
			return Shares{}, fmt.Errorf("shares: unknown name %q (have %s)", name, strings.Join(names, ", "))
		}
		x, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil || math.IsNaN(x) || x < 0 || x > 1 {
			return Shares{}, fmt.Errorf("shares: %s=%q: want a fraction in [0,1]", name, val)
		}
		*field = x
	}
	return s, nil
}

// String is the ParseShares form of s.
func (s Shares) String() string {
	var b strings.Builder
	for i, f := range s.fields() {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(f.name + "=" + strconv.FormatFloat(*f.v, 'g', -1, 64))
	}
	return b.String()
}
