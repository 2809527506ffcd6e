package analysis_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/report"
	"github.com/mptester/mptester/report/analysis"
)

// bigSurvey streams, without holding it, a survey of domains domains over
// two paths: a resolution record per domain and path and a probe record
// per address and probe path with 10 RTTs (about 2.3 KB per domain).
func bigSurvey(domains int) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		var buf bytes.Buffer
		h := report.Header{SchemaVersion: report.SchemaVersion, RunID: "44444444-2222-4333-8444-555555555555", ProbeID: "m",
			Command: "survey", Tool: report.Tool{Name: "mptester"}, StartedAt: time.Unix(1e9, 0),
			Paths: []report.Path{{Name: "wlan0"}, {Name: "wwan0"}}}
		s, _ := report.NewStream(pw, h)
		paths := []string{"wlan0", "wwan0"}
		for d := range domains {
			for pi, p := range paths {
				addr := fmt.Sprintf("198.%d.%d.%d", 18+pi*(d%3/2), d/256%256, d%256)
				fmt.Fprintf(&buf, `{"type":"resolution","domain":"d%d.example","rank":%d,"path":%q,"status":"NOERROR","answers":[%q],"cname_chain":["cdn%d.example"],"time_ms":12.5,"queries":[{"qtype":"A","status":"NOERROR","server":"198.18.1.1:53","attempts":1,"time_ms":12.5},{"qtype":"AAAA","status":"NOERROR","server":"198.18.1.1:53","attempts":1,"time_ms":11}],"bytes":160,"valid":true}`,
					d, d+1, p, addr, d)
				_ = s.Write(jsonRaw(buf.Bytes()))
				buf.Reset()
				for _, probe := range paths {
					rtt := 10 + float64(d%97)
					fmt.Fprintf(&buf, `{"type":"probe","probe_path":%q,"resolve_path":%q,"resolve_paths":[%q],"address":%q,"port":443,"domains":["d%d.example"],"method":"tcp-syn","sent":10,"received":10,"rtts_ms":[%g,%g,%g,%g,%g,%g,%g,%g,%g,%g],"min":%g,"median":%g,"mean":%g,"max":%g,"stddev":0.3,"answer":"syn-ack","answer_counts":{"syn-ack":10},"responsive":true,"bytes":600,"valid":true}`,
						probe, p, p, addr, d, rtt, rtt+0.1, rtt+0.2, rtt-0.1, rtt, rtt+0.3, rtt-0.2, rtt, rtt+0.1, rtt, rtt-0.2, rtt, rtt, rtt+0.3)
					_ = s.Write(jsonRaw(buf.Bytes()))
					buf.Reset()
				}
			}
		}
		pw.CloseWithError(s.Close(report.StatusOK, ""))
	}()
	return pr
}

type jsonRaw []byte

func (j jsonRaw) MarshalJSON() ([]byte, error) { return j, nil }

type counting struct {
	r io.Reader
	n int64
}

func (c *counting) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// BenchmarkSurveyReport reads a 1,000- and a 10,000-domain survey file (2.3
// and 22.5 MB) and reports the input rate and the peak heap in use,
// sampled every 10 ms (TestSurveyIsStreamed bounds it), and, as the peer,
// the time of one jq pass over the same file in the same run.
func BenchmarkSurveyReport(b *testing.B) {
	for _, domains := range []int{1000, 10000} {
		b.Run(fmt.Sprint(domains), func(b *testing.B) {
			p := filepath.Join(b.TempDir(), "survey.jsonl")
			f, err := os.Create(p)
			require.NoError(b, err)
			n, err := io.Copy(f, bigSurvey(domains))
			require.NoError(b, err)
			require.NoError(b, f.Close())
			b.SetBytes(n)
			b.ResetTimer()
			var peak uint64
			for range b.N {
				peak = max(peak, peakHeap(func() {
					_, err := analysis.Analyze(analysis.Files(p))
					require.NoError(b, err)
				}))
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
			// The peer: the least a script must do, one jq pass that
			// parses every line and prints the probe medians.
			jq, err := exec.LookPath("jq")
			if err != nil {
				return
			}
			b.StopTimer()
			t0 := time.Now()
			for range b.N {
				out, err := exec.Command(jq, "-c", `select(.type=="probe") | .median`, p).Output()
				require.NoError(b, err)
				require.NotEmpty(b, out)
			}
			jqNs := float64(time.Since(t0).Nanoseconds()) / float64(b.N)
			b.ReportMetric(jqNs/1e6, "jq-ms/op")
			b.StartTimer()
		})
	}
}

// peakHeap runs f and returns the highest HeapInuse seen meanwhile.
func peakHeap(f func()) uint64 {
	runtime.GC()
	done := make(chan struct{})
	res := make(chan uint64)
	go func() {
		var peak uint64
		var ms runtime.MemStats
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-done:
				res <- peak
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(done)
	return <-res
}

// TestSurveyIsStreamed: a 15,000-domain survey (34 MB of records) is read
// with a peak heap (garbage not yet collected included) under 0.75 of the
// file's size, where holding the file would take at least its size:
// records are streamed through one reused line buffer, and only per-target
// and per-domain state is kept (one float per target and cell, interned
// addresses, address ids per domain and path: memory grows with targets
// and domains, never with the records or their RTT samples).
func TestSurveyIsStreamed(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 34 MB")
	}
	c := &counting{r: bigSurvey(15000)}
	peak := peakHeap(func() {
		rep, err := analysis.Analyze([]analysis.Input{{Name: "big.jsonl", Open: func() (io.ReadCloser, error) { return io.NopCloser(c), nil }}})
		require.NoError(t, err)
		un, _ := rep.Table("unresponsive")
		require.Equal(t, "15000", un.Rows[0][1]) // wlan0/wlan0: one address per domain
	})
	t.Logf("read %.1f MB, peak heap %.1f MB", float64(c.n)/(1<<20), float64(peak)/(1<<20))
	require.Greater(t, c.n, int64(30<<20))
	require.Less(t, peak, uint64(c.n*3/4))
}

// BenchmarkCheck is what a collector spends reading one small upload
// through every section before acknowledging it.
func BenchmarkCheck(b *testing.B) {
	doc, err := os.ReadFile("../testdata/document.json")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		in := analysis.Input{Name: "upload", Open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(doc)), nil }}
		if err := analysis.Check(in, nil); err != nil {
			b.Fatal(err)
		}
	}
}
