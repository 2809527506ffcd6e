package survey

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func isRoot() bool { return os.Geteuid() == 0 }

// The loopback survey: a real DNS server with every status, real TCP
// listeners; expected numbers follow from the zone.
func TestRunLoopback(t *testing.T) {
	methods := []string{"tcp-connect", "tcp-syn", "icmp"}
	for _, m := range methods {
		t.Run(m, func(t *testing.T) {
			if m != "tcp-connect" && !isRoot() {
				if os.Getenv("CI") == "true" {
					t.Fatalf("%s needs root (CI=true: not skipping)", m)
				}
				t.Skipf("%s needs root", m)
			}
			dnsAddr := startDNS(t, defaultZone())
			port := startListener(t)
			cfg := baseConfig(loopback(t, dnsAddr), port)
			cfg.Method = m
			var out bytes.Buffer
			s, err := runToBuffer(t, context.Background(), cfg, &out)
			require.NoError(t, err)
			require.Len(t, s.Resolution, 1)
			r := s.Resolution[0]
			assert.Equal(t, 10, r.Domains)
			assert.Equal(t, 5, r.Resolved)
			assert.Equal(t, 5, r.Failed)
			assert.Equal(t, map[string]int{"NOERROR": 5, "NXDOMAIN": 1, "SERVFAIL": 1, "REFUSED": 1, "TIMEOUT": 1, "NO_ANSWER": 1}, r.ByStatus)
			require.Len(t, s.Cells, 1)
			c := s.Cells[0]
			assert.Equal(t, 104, c.Targets)
			assert.Equal(t, 104, c.Responsive)
			assert.Less(t, c.RTTms.Max, 20.0, "loopback RTT")
			assert.Greater(t, c.RTTms.Min, 0.0)

			recs := records(t, out.Bytes())
			assert.Len(t, recs["resolution"], 10)
			assert.Len(t, recs["probe"], 104)
			assert.Len(t, recs["summary"], 1)
			kinds := map[string]string{}
			for _, b := range recs["probe"] {
				var p ProbeRecord
				require.NoError(t, json.Unmarshal(b, &p))
				assert.Equal(t, 3, p.Sent, p.Address)
				assert.Equal(t, 3, p.Received, p.Address)
				kinds[p.Address.String()] = string(p.Answer)
			}
			switch m {
			case "tcp-connect":
				assert.Equal(t, "connect", kinds["127.0.0.1"])
				assert.Equal(t, "rst", kinds["127.0.0.2"])
			case "tcp-syn":
				assert.Equal(t, "syn-ack", kinds["127.0.0.1"])
				assert.Equal(t, "rst", kinds["127.0.0.2"])
			case "icmp":
				assert.Equal(t, "echo-reply", kinds["127.0.0.2"])
			}
			for _, b := range recs["resolution"] {
				var rr ResolutionRecord
				require.NoError(t, json.Unmarshal(b, &rr))
				switch rr.Domain {
				case "alias.test":
					assert.Equal(t, []string{"c1.test", "c2.test"}, rr.CNAMEs)
					assert.Equal(t, "127.0.0.4", rr.Answers[0].String())
				case "big.test":
					assert.Len(t, rr.Answers, 100)
					assert.True(t, rr.Queries[0].TCP, "truncated answer retried over TCP")
				case "hang.test":
					assert.Equal(t, 2, rr.Queries[0].Attempts)
				}
			}
		})
	}
}
