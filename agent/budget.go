package agent

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mptester/mptester/collect/api"
	"github.com/mptester/mptester/internal/fsutil"
	"github.com/mptester/mptester/upload"
)

// budget is the bytes each path carried per calendar month (UTC), as the
// results recorded them; kept in the state directory across reboots.
type budget struct {
	Months map[string]map[string]int64 `json:"months"`
}

func month(t time.Time) string { return t.UTC().Format("2006-01") }

func (a *Agent) loadBudget() budget {
	b := budget{Months: map[string]map[string]int64{}}
	if raw, err := os.ReadFile(filepath.Join(a.Dir, "budget.json")); err == nil {
		_ = json.Unmarshal(raw, &b)
	}
	if b.Months == nil {
		b.Months = map[string]map[string]int64{}
	}
	return b
}

func (a *Agent) saveBudget(b budget, now time.Time) error {
	// Only this month and the last are kept.
	prev := month(now.UTC().AddDate(0, -1, 0))
	for m := range b.Months {
		if m != month(now) && m != prev {
			delete(b.Months, m)
		}
	}
	raw, _ := json.Marshal(b)
	return fsutil.WriteFileAtomic(filepath.Join(a.Dir, "budget.json"), raw, 0o600)
}

// budgetPaths are the budgeted paths t may use: those it names, else the
// owner's paths, else every budgeted path.
func (a *Agent) budgetPaths(t api.Task) []string {
	paths := t.Paths()
	if len(paths) == 0 {
		paths = a.Caps.Paths
	}
	var out []string
	for name := range a.Caps.Budget {
		if len(paths) == 0 || slices.Contains(paths, name) {
			out = append(out, name)
		}
	}
	return out
}

// The run command's defaults (package patterns; internal/cmd/agent's test
// holds them equal) and the ceilings the estimate assumes.
const (
	DefaultPatterns       = "ping,bulk,iperf,interactive"
	DefaultTransports     = 6 // tcp, mptcp, quic, quic-handover, mpquic, mphttp
	HandoverTransports    = 3 // mobile mode's
	DefaultBulkSize       = 10_000_000
	DefaultIperf          = 7 * time.Second
	DefaultPingCount      = 5
	DefaultChunk          = 2000
	DefaultInterval       = 100 * time.Millisecond
	DefaultMobileDuration = 60 * time.Second
	// IperfCeiling is the rate an iperf test is assumed to reach at most
	// in each direction (100 Mbit/s): iperf sends as fast as the path
	// goes, so its bytes are its duration at this rate.
	IperfCeiling = 100e6 / 8
	// perTest is a test's fixed cost: handshakes, certificates, framing.
	perTest = 20_000
	// perPing is one ping request and its answer with their headers.
	perPing = 2_000
)

// estimate is the bytes t may move on each path it uses, its defaults
// included: per transport, every pattern's bytes (bulk's size, iperf's
// duration per direction at IperfCeiling, interactive's chunks both
// ways, ping's requests) plus a test's fixed cost; with several servers,
// the pings that choose one. A multipath transport is counted whole on
// every path. 0 for a survey (it gets the rest as --max-bytes).
func estimate(t api.Task) int64 {
	p := t.Run
	if p == nil {
		return 0
	}
	pats := p.Patterns
	if len(pats) == 0 {
		pats = strings.Split(DefaultPatterns, ",")
	}
	tr := int64(len(p.Transports))
	if tr == 0 {
		tr = DefaultTransports
	}
	dur := time.Duration(p.Duration)
	if p.Mode == "mobile" {
		pats = []string{"interactive"}
		if len(p.Transports) == 0 {
			tr = HandoverTransports
		}
		dur = cmp.Or(dur, DefaultMobileDuration)
	}
	dur = cmp.Or(dur, DefaultIperf)
	pings := int64(cmp.Or(p.PingCount, DefaultPingCount))
	var per int64
	for _, name := range pats {
		per += perTest
		switch name {
		case "ping":
			per += pings * perPing
		case "bulk":
			per += cmp.Or(p.Size, DefaultBulkSize)
		case "iperf":
			dirs := int64(2)
			if p.IperfDirection == "upload" || p.IperfDirection == "download" {
				dirs = 1
			}
			per += dirs * int64(dur.Seconds()*IperfCeiling)
		case "interactive":
			interval := cmp.Or(time.Duration(p.Interval), DefaultInterval)
			chunks := int64(dur / interval)
			per += 2 * chunks * int64(cmp.Or(p.ChunkSize, DefaultChunk)+perPing/10)
		}
	}
	total := per * tr
	if len(p.Servers) > 1 {
		total += int64(len(p.Servers)) * (perTest + pings*perPing) * tr
	}
	return total
}

// checkBudget returns the bytes left on each budgeted path t may use, or
// a reason to skip t this time.
func (a *Agent) checkBudget(t api.Task, b budget, now time.Time) (map[string]int64, string) {
	left := map[string]int64{}
	used := b.Months[month(now)]
	need := estimate(t)
	for _, p := range a.budgetPaths(t) {
		limit := a.Caps.Budget[p]
		l := limit - used[p]
		if l <= 0 || need > l {
			next := time.Date(now.UTC().Year(), now.UTC().Month()+1, 1, 0, 0, 0, 0, time.UTC)
			return nil, fmt.Sprintf("data budget of %s: %s of %s used in %s; this task needs about %s; it runs again when the budget allows (from %s)",
				p, mb(used[p]), mb(limit), month(now), mb(need), next.Format("2006-01-02"))
		}
		left[p] = l
	}
	return left, ""
}

// spend adds used to this month's count and saves it.
func (a *Agent) spend(b *budget, used map[string]int64) error {
	m := month(a.now())
	if b.Months[m] == nil {
		b.Months[m] = map[string]int64{}
	}
	for p, n := range used {
		if _, ok := a.Caps.Budget[p]; ok {
			b.Months[m][p] += n
		}
	}
	return a.saveBudget(*b, a.now())
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

// spooled lists the names of the results waiting in the spool.
func spooled(sp *upload.Spool) map[string]bool {
	out := map[string]bool{}
	if sp == nil {
		return out
	}
	items, _ := sp.Pending()
	for _, it := range items {
		out[it.Name] = true
	}
	return out
}

// recordedBytes sums the bytes each path carried in the results spooled
// since before (pattern tests' path_bytes, a survey summary's bytes_sent).
func recordedBytes(sp *upload.Spool, before map[string]bool) map[string]int64 {
	out := map[string]int64{}
	if sp == nil {
		return out
	}
	items, _ := sp.Pending()
	for _, it := range items {
		if before[it.Name] {
			continue
		}
		f, err := sp.Open(it)
		if err != nil {
			continue
		}
		addRecorded(out, f, strings.HasSuffix(it.Name, ".json"))
		f.Close()
	}
	return out
}

type byteLine struct {
	Type      string `json:"type"`
	PathBytes []struct {
		Path     string `json:"path"`
		Sent     int64  `json:"bytes_sent"`
		Received int64  `json:"bytes_received"`
	} `json:"path_bytes"`
	BytesSent map[string]int64 `json:"bytes_sent"`
}

func (l byteLine) add(out map[string]int64) {
	switch l.Type {
	case "pattern_test":
		for _, pb := range l.PathBytes {
			out[pb.Path] += pb.Sent + pb.Received
		}
	case "summary":
		for p, n := range l.BytesSent {
			out[p] += n
		}
	}
}

func addRecorded(out map[string]int64, r io.Reader, document bool) {
	if document {
		var doc struct {
			Records []byteLine `json:"records"`
		}
		if json.NewDecoder(r).Decode(&doc) == nil {
			for _, l := range doc.Records {
				l.add(out)
			}
		}
		return
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var l byteLine
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			l.add(out)
		}
	}
}
