package survey

import (
	"net"
	"testing"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
)

func TestAnswersFollowCNAMEChain(t *testing.T) {
	m := new(dns.Msg)
	m.SetQuestion("www.Example.com.", dns.TypeA)
	rr := func(s string) dns.RR { r, err := dns.NewRR(s); assert.NoError(t, err); return r }
	m.Answer = []dns.RR{
		rr("www.example.com. 60 IN CNAME edge.cdn.net."),
		rr("edge.cdn.net. 60 IN CNAME loop.cdn.net."),
		rr("loop.cdn.net. 60 IN CNAME edge.cdn.net."), // a loop ends the chain
		rr("edge.cdn.net. 60 IN A 198.19.0.7"),
		rr("loop.cdn.net. 60 IN A 198.19.0.8"),
		rr("other.net. 60 IN A 198.19.0.9"), // not in the chain: ignored
		rr("edge.cdn.net. 60 IN AAAA fd00:ff::7"),
	}
	addrs, chain := answers("www.example.com.", dns.TypeA, m)
	assert.Equal(t, []string{"edge.cdn.net", "loop.cdn.net"}, chain)
	assert.Equal(t, "[198.19.0.7 198.19.0.8]", formatAddrs(addrs))
}

func formatAddrs[T interface{ String() string }](xs []T) string {
	s := "["
	for i, x := range xs {
		if i > 0 {
			s += " "
		}
		s += x.String()
	}
	return s + "]"
}

// FuzzAnswers feeds arbitrary DNS messages to the answer extraction.
func FuzzAnswers(f *testing.F) {
	m := new(dns.Msg)
	m.SetQuestion("a.test.", dns.TypeA)
	m.Answer = []dns.RR{&dns.CNAME{Hdr: dns.RR_Header{Name: "a.test.", Rrtype: dns.TypeCNAME, Class: dns.ClassINET}, Target: "b.test."},
		&dns.A{Hdr: dns.RR_Header{Name: "b.test.", Rrtype: dns.TypeA, Class: dns.ClassINET}, A: net.IPv4(198, 19, 0, 1)}}
	b, _ := m.Pack()
	f.Add(b)
	f.Add([]byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		var m dns.Msg
		if m.Unpack(b) != nil || len(m.Question) == 0 {
			return
		}
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
			addrs, chain := answers(m.Question[0].Name, qt, &m)
			if len(chain) > 16 {
				t.Fatalf("chain longer than the loop guard: %d", len(chain))
			}
			for _, a := range addrs {
				if qt == dns.TypeA && !a.Is4() {
					t.Fatalf("A answer %v is not IPv4", a)
				}
			}
		}
	})
}
