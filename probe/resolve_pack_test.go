package probe

import (
	"bytes"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// packQuery must put on the wire exactly what dns.Msg would (the servers
// we meet parse that), and refuse exactly the names dns.Msg refuses.
func FuzzPackQueryAsMsg(f *testing.F) {
	for _, s := range []string{
		"example.com", "example.com.", ".", "a", "xn--bcher-kva.example",
		"UPPER.Case.Example", `dot\.in.label`, `\065\066c.test`, "under_score.test",
		strings.Repeat("a", 63) + ".test", strings.Repeat("a", 64) + ".test",
		strings.Repeat("abcdefghi.", 25) + "abc", strings.Repeat("abcdefghi.", 26),
		"double..dot", "-lead.test", "trail-.test", "sp ace.test", "é.test", `back\`,
	} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, name string, four bool) {
		qt := dns.TypeAAAA
		if four {
			qt = dns.TypeA
		}
		fqdn := dns.Fqdn(name)
		m := new(dns.Msg)
		m.SetQuestion(fqdn, qt)
		m.SetEdns0(ednsSize, false)
		m.Id = 0
		want, werr := m.Pack()
		got, gerr := packQuery(fqdn, qt)
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("%q: dns.Msg error %v, packQuery error %v", fqdn, werr, gerr)
		}
		if werr == nil && !bytes.Equal(got, want) {
			t.Fatalf("%q:\n packQuery %x\n dns.Msg   %x", fqdn, got, want)
		}
	})
}
