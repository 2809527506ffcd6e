package survey

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/probe"
)

// The resolution record keeps its JSON shape (field names, omitempty) now
// that the lookup itself lives in package probe.
func TestResolutionRecordJSON(t *testing.T) {
	srv := startDNS(t, defaultZone())
	var sent atomic.Int64
	p := loopback(t, srv)
	r, err := NewResolver(p, 200*time.Millisecond, 0, 4, &sent, nil)
	require.NoError(t, err)
	assert.Equal(t, srv.String(), fmt.Sprint(r.servers[0]))
	qlen := func(name string, qt uint16) int64 {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), qt)
		m.SetEdns0(1232, false)
		return int64(m.Len()) + 28
	}
	cases := []struct {
		d    Domain
		fam  probe.Family
		want string
	}{
		{Domain{Rank: 4, Name: "alias.test"}, probe.Family4,
			`{"type":"resolution","domain":"alias.test","rank":4,"path":"lo","status":"NOERROR","answers":["127.0.0.4"],"cname_chain":["c1.test","c2.test"],"time_ms":0,` +
				`"queries":[{"qtype":"A","status":"NOERROR","server":"SRV","attempts":1,"time_ms":0}],"bytes":%d,"valid":true}`},
		{Domain{Rank: 5, Name: "nx.test"}, probe.FamilyAny,
			`{"type":"resolution","domain":"nx.test","rank":5,"path":"lo","status":"NXDOMAIN","answers":[],"time_ms":0,` +
				`"queries":[{"qtype":"A","status":"NXDOMAIN","server":"SRV","attempts":1,"time_ms":0},{"qtype":"AAAA","status":"NXDOMAIN","server":"SRV","attempts":1,"time_ms":0}],"bytes":%d,"valid":true}`},
		{Domain{Rank: 9, Name: "big.test"}, probe.Family4, ""},
		{Domain{Rank: 8, Name: "hang.test"}, probe.Family4, ""},
	}
	for _, c := range cases {
		rec := r.Resolve(context.Background(), c.d, c.fam)
		assert.Positive(t, rec.TimeMs)
		rec.TimeMs = 0
		for i := range rec.Queries {
			rec.Queries[i].TimeMs = 0
		}
		switch c.d.Name {
		case "big.test":
			assert.Len(t, rec.Answers, 100)
			assert.True(t, rec.Queries[0].TCP)
			continue
		case "hang.test":
			assert.Equal(t, StatusTimeout, rec.Status)
			assert.Contains(t, rec.Queries[0].Error, "timeout")
			continue
		}
		want := c.d.Name
		var bytes int64
		for _, q := range rec.Queries {
			bytes += qlen(want, dns.StringToType[q.QType])
		}
		b, err := json.Marshal(rec)
		require.NoError(t, err)
		exp := fmt.Sprintf(c.want, bytes)
		exp = strings.ReplaceAll(exp, "SRV", srv.String())
		assert.JSONEq(t, exp, string(b))
		assert.Equal(t, exp, string(b), "byte-identical field order")
	}
}
