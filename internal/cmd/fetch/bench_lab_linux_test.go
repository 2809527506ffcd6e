//go:build linux && !race

package fetch

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/labtest"
)

// BenchmarkLabFetchVsCurl: `mptester fetch` over one lab path against curl
// on the same path and object, alternated in one run (the target:
// at least 0.95x curl's rate). Each tool runs as its own process in the
// client namespace, bound to wlan0; the path is 50 ms RTT at the rate
// below, as 003 §6.3's settings. Reports the median rate of each and the
// ratio of medians.
//
//	go test -run XXX -bench LabFetchVsCurl -benchtime 1x ./internal/cmd/fetch
func BenchmarkLabFetchVsCurl(b *testing.B) {
	if _, err := exec.LookPath("curl"); err != nil {
		b.Skip("curl not installed")
	}
	l := labtest.Start(b, lab.Options{Domains: 0, Seed: 18})
	const port, size, reps = 8085, 30_000_000, 5
	bin := filepath.Join(b.TempDir(), "mptester")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/mptester/mptester/cmd/mptester").CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	serveBulk(b, l, port, size)
	for _, p := range lab.PathNames {
		l.Set(b, p, "delay=25ms", "jitter=0s", "loss=0", "rate=50mbit")
	}
	url := fmt.Sprintf("http://%s:%d/obj", lab.Server4, port)
	run := func(argv ...string) float64 {
		t0 := time.Now()
		if out, err := l.Exec(context.Background(), "client", argv...); err != nil {
			b.Fatalf("%v: %v\n%s", argv, err, out)
		}
		return float64(size) * 8 / time.Since(t0).Seconds() / 1e6
	}
	for b.Loop() {
		var fetch, curl []float64
		for i := 0; i < reps; i++ {
			fetch = append(fetch, run(bin, "fetch", "--paths", "wlan0", "-o", "/dev/null", url))
			curl = append(curl, run("curl", "-sS", "--fail", "--interface", "wlan0", "-o", "/dev/null", url))
		}
		slices.Sort(fetch)
		slices.Sort(curl)
		mf, mc := fetch[reps/2], curl[reps/2]
		b.Logf("fetch Mbit/s %.1f, curl Mbit/s %.1f (each sorted, %d runs, whole process wall time)", fetch, curl, reps)
		b.ReportMetric(mf, "fetch_Mbit/s")
		b.ReportMetric(mc, "curl_Mbit/s")
		b.ReportMetric(mf/mc, "ratio")
	}
}
