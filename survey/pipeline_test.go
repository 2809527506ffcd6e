package survey

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mptester/mptester/survey/internal/spill"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProbingOverlapsResolution: late.test's DNS answer is held until the
// listener has accepted a probe, so it resolves only if probing starts
// while resolution still runs (run one after the other, its queries time
// out after 2x3 s). Probe records finished during resolution (slow.test
// keeps it running 500 ms more) are held until it ends: the record of
// 127.0.0.1 must list every domain resolving to it, late.test included.
func TestProbingOverlapsResolution(t *testing.T) {
	z := defaultZone()
	gate := make(chan struct{})
	z.Gate = map[string]chan struct{}{"late.test.": gate}
	z.A["late.test."] = []string{"127.0.0.1", "127.0.0.9"}
	z.A["slow.test."] = []string{"127.0.0.10"}
	z.Delay = map[string]time.Duration{"slow.test.": 500 * time.Millisecond}
	dnsAddr := startDNS(t, z)
	var once sync.Once
	port := startListenerFunc(t, func() { once.Do(func() { close(gate) }) })
	t.Cleanup(func() { once.Do(func() { close(gate) }) })

	cfg := baseConfig(loopback(t, dnsAddr), port)
	cfg.Domains = slices.DeleteFunc(slices.Clone(cfg.Domains), func(d Domain) bool { return d.Name == "hang.test" })
	cfg.Domains = append(cfg.Domains, Domain{Rank: 11, Name: "late.test"}, Domain{Rank: 12, Name: "slow.test"})
	cfg.DNSTimeout = 3 * time.Second
	var out bytes.Buffer
	s, err := runToBuffer(t, context.Background(), cfg, &out)
	require.NoError(t, err)
	assert.Equal(t, 7, s.Resolution[0].ByStatus[StatusNoError], "late.test resolved: probing ran during resolution")
	assert.Equal(t, 106, s.Cells[0].Targets)

	recs := records(t, out.Bytes())
	require.Equal(t, 106, len(recs["probe"]), "probe records")
	for _, b := range recs["probe"] {
		var p ProbeRecord
		require.NoError(t, json.Unmarshal(b, &p))
		switch p.Address.String() {
		case "127.0.0.1":
			assert.Equal(t, []string{"open.test", "multi.test", "late.test"}, p.Domains)
		case "127.0.0.9":
			assert.Equal(t, []string{"late.test"}, p.Domains)
		}
		assert.Equal(t, []string{"lo"}, p.ResolvePaths)
		assert.True(t, p.Valid)
	}
	// Resolution records come first for each target: none of its probe
	// records may precede the resolution naming its address.
	seen := map[string]bool{}
	for _, l := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var r struct {
			Type    string
			Answers []string
			Address string
		}
		require.NoError(t, json.Unmarshal(l, &r))
		switch r.Type {
		case "resolution":
			for _, a := range r.Answers {
				seen[a] = true
			}
		case "probe":
			assert.True(t, seen[r.Address], "probe record of %s before its resolution", r.Address)
		}
	}
}

// TestHeldRecordsCapped: while resolution runs (hang.test times out for
// 2x300 ms) and no temporary file can take them, at most MaxHeld probe
// records wait for it; probing pauses at the cap and every target is
// still probed once it ends.
func TestHeldRecordsCapped(t *testing.T) {
	testNoSpill = true
	defer func() { testNoSpill = false }()
	out, logs, held := runHeld(t)
	assert.Equal(t, 104, len(records(t, out.Bytes())["probe"]), "probe records")
	assert.LessOrEqual(t, held, 7)
	assert.Contains(t, logs.String(), "probing paused until resolution ends")
}

// TestHeldRecordsSpilled: past heldInMemory (5 here) the records held
// while resolution runs go to a temporary file, probing never pauses, and
// every record comes back once, completed with its domains.
func TestHeldRecordsSpilled(t *testing.T) {
	spill.TestQueueInMemory = 5
	defer func() { spill.TestQueueInMemory = 0 }()
	out, logs, held := runHeld(t)
	seen := map[string]int{}
	for _, b := range records(t, out.Bytes())["probe"] {
		var p ProbeRecord
		require.NoError(t, json.Unmarshal(b, &p))
		seen[p.Address.String()]++
		assert.NotEmpty(t, p.Domains, p.Address)
		assert.Equal(t, []string{"lo"}, p.ResolvePaths, p.Address)
		assert.Equal(t, 3, p.Received, p.Address)
	}
	assert.Len(t, seen, 104)
	for a, n := range seen {
		assert.Equal(t, 1, n, a)
	}
	assert.Greater(t, held, 7, "more than MaxHeld held: spilled, not paused")
	assert.NotContains(t, logs.String(), "probing paused")
}

// runHeld surveys the default zone (hang.test keeps resolution running
// 2x300 ms) with MaxHeld 7; it returns the output, the logs and how many
// probe records were held until resolution ended.
func runHeld(t *testing.T) (out, logs *bytes.Buffer, held int) {
	dnsAddr := startDNS(t, defaultZone())
	port := startListener(t)
	cfg := baseConfig(loopback(t, dnsAddr), port)
	cfg.MaxHeld = 7
	logs, out = &bytes.Buffer{}, &bytes.Buffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	s, err := runToBuffer(t, context.Background(), cfg, out)
	require.NoError(t, err)
	assert.Equal(t, 104, s.Cells[0].Targets)
	m := regexp.MustCompile(`probe records held until resolution ended" count=(\d+)`).FindStringSubmatch(logs.String())
	require.NotNil(t, m, logs.String())
	held, _ = strconv.Atoi(m[1])
	return out, logs, held
}

// TestAddrRecordsSpilled: with every address record past the first in the
// temporary file, a run says what it says with them all in memory: the
// same targets, the same verdicts and domains, the same cells.
func TestAddrRecordsSpilled(t *testing.T) {
	run := func(memRecs int) (Summary, map[string]string) {
		defer func(old int) { testAddrMemRecords = old }(testAddrMemRecords)
		testAddrMemRecords = memRecs
		dnsAddr := startDNS(t, defaultZone())
		cfg := baseConfig(loopback(t, dnsAddr), startListener(t))
		var out bytes.Buffer
		s, err := runToBuffer(t, context.Background(), cfg, &out)
		require.NoError(t, err)
		got := map[string]string{}
		for _, b := range records(t, out.Bytes())["probe"] {
			var p ProbeRecord
			require.NoError(t, json.Unmarshal(b, &p))
			got[p.Address.String()] = fmt.Sprint(p.Responsive, p.Domains, p.ResolvePaths)
		}
		for i := range s.Cells {
			s.Cells[i].RTTms = RTTStats{} // timing differs between runs
		}
		return s, got
	}
	inMemory, want := run(0)
	spilled, got := run(1)
	assert.Greater(t, len(want), 100)
	assert.Equal(t, want, got)
	assert.Equal(t, inMemory.Cells, spilled.Cells)
	assert.Equal(t, inMemory.Resolution, spilled.Resolution)
	assert.Equal(t, inMemory.Overlap, spilled.Overlap)
}
