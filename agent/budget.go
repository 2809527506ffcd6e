package agent

import (
	"bufio"
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

// estimate is the bytes t is known to move on each path it uses: a run's
// bulk downloads (size x transports x servers); 0 when it cannot tell.
func estimate(t api.Task) int64 {
	p := t.Run
	if p == nil || p.Size == 0 || (len(p.Patterns) > 0 && !slices.Contains(p.Patterns, "bulk")) {
		return 0
	}
	tr := max(len(p.Transports), 1)
	return p.Size * int64(tr) * int64(len(p.Servers))
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
