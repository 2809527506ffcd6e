package sweep

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// CellSummary is one cell over its repetitions ("sweep_cell"): what 004
// §IV plots, the goodput (Fig. 5) and each path's share of the traffic
// (Fig. 4), plus the completion time.
type CellSummary struct {
	Type string `json:"type"`
	Cell
	Runs int `json:"runs"`
	OK   int `json:"ok"` // successful runs; only they enter the figures
	// Goodput of the successful runs: median and the interquartile
	// spread.
	GoodputMedian float64 `json:"goodput_median_bps"`
	GoodputP25    float64 `json:"goodput_p25_bps"`
	GoodputP75    float64 `json:"goodput_p75_bps"`
	// Completion time from the request to the last byte.
	CompletionMedian time.Duration `json:"completion_median_ns"`
	CompletionP25    time.Duration `json:"completion_p25_ns"`
	CompletionP75    time.Duration `json:"completion_p75_ns"`
	// Share per path (PathNames order): mean over the successful runs of
	// each run's share (kernel counters when the transport has them).
	Share       []float64 `json:"share"`
	ShareSource string    `json:"share_source"`
	// EmuShare: the same from the emulator's delivered bytes, the
	// cross-check.
	EmuShare []float64 `json:"emu_share"`
	// MaxShareDiff: the largest difference between a run's kernel and
	// emulator share of a path (0 when the share is the emulator's).
	// Over a lossy path the emulator also carries retransmitted joins and
	// data of a subflow the kernel's last sample no longer lists.
	MaxShareDiff float64 `json:"max_share_diff"`
	// OneSubflow counts the successful MPTCP runs whose second subflow
	// never came up; NotNegotiated those that fell back to TCP.
	OneSubflow    int `json:"one_subflow_runs"`
	NotNegotiated int `json:"not_negotiated_runs"`
}

// quantile of sorted xs (linear interpolation between closest ranks).
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	pos := q * float64(len(xs)-1)
	i := int(pos)
	if i+1 >= len(xs) {
		return xs[len(xs)-1]
	}
	return xs[i] + (pos-float64(i))*(xs[i+1]-xs[i])
}

// Summarise folds a cell's runs.
func Summarise(c Cell, runs []Result) CellSummary {
	s := CellSummary{Type: "sweep_cell", Cell: c, Runs: len(runs), Share: make([]float64, len(c.Paths)), EmuShare: make([]float64, len(c.Paths))}
	var gp, ct []float64
	for _, r := range runs {
		if r.Status != "success" {
			continue
		}
		s.OK++
		if r.MPTCPNegotiated != nil {
			if !*r.MPTCPNegotiated {
				s.NotNegotiated++
			} else if r.Subflows < 2 {
				s.OneSubflow++
			}
		}
		gp = append(gp, r.GoodputBps)
		ct = append(ct, float64(r.Completion))
		s.ShareSource = r.ShareSource
		var eTotal uint64
		for _, p := range r.PathBytes {
			eTotal += p.EmuBytes
		}
		for i, p := range r.PathBytes {
			if i < len(s.Share) {
				s.Share[i] += p.Share
				if eTotal > 0 {
					es := float64(p.EmuBytes) / float64(eTotal)
					s.EmuShare[i] += es
					if r.ShareSource == "kernel" {
						s.MaxShareDiff = max(s.MaxShareDiff, math.Abs(p.Share-es))
					}
				}
			}
		}
	}
	if s.OK == 0 {
		return s
	}
	for i := range s.Share {
		s.Share[i] /= float64(s.OK)
		s.EmuShare[i] /= float64(s.OK)
	}
	slices.Sort(gp)
	slices.Sort(ct)
	s.GoodputMedian, s.GoodputP25, s.GoodputP75 = quantile(gp, 0.5), quantile(gp, 0.25), quantile(gp, 0.75)
	s.CompletionMedian, s.CompletionP25, s.CompletionP75 = time.Duration(quantile(ct, 0.5)), time.Duration(quantile(ct, 0.25)), time.Duration(quantile(ct, 0.75))
	return s
}

// WriteCSV writes the summaries, one row per cell.
func WriteCSV(w io.Writer, sums []CellSummary) error {
	cw := csv.NewWriter(w)
	head := []string{"cell", "transport", "primary", "size_bytes"}
	for _, n := range PathNames {
		head = append(head, n+"_rtt_ms", n+"_jitter_ms", n+"_loss_pct", n+"_rate_bps")
	}
	head = append(head, "runs", "ok", "goodput_median_mbps", "goodput_p25_mbps", "goodput_p75_mbps",
		"completion_median_ms", "completion_p25_ms", "completion_p75_ms", "share_source", "max_share_diff", "one_subflow_runs", "not_negotiated_runs")
	for _, n := range PathNames {
		head = append(head, "share_"+n)
	}
	for _, n := range PathNames {
		head = append(head, "emu_share_"+n)
	}
	for _, n := range PathNames {
		head = append(head, n+"_impair") // last: earlier columns keep their places
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }
	ms := func(d time.Duration) string { return f(float64(d) / 1e6) }
	for _, s := range sums {
		row := []string{strconv.Itoa(s.Index), s.Transport, s.Primary, strconv.FormatInt(s.Size, 10)}
		for _, p := range s.Paths {
			row = append(row, ms(p.RTT), ms(p.Jitter), f(p.Loss*100), strconv.FormatInt(p.RateBps, 10))
		}
		row = append(row, strconv.Itoa(s.Runs), strconv.Itoa(s.OK), f(s.GoodputMedian/1e6), f(s.GoodputP25/1e6), f(s.GoodputP75/1e6),
			ms(s.CompletionMedian), ms(s.CompletionP25), ms(s.CompletionP75), s.ShareSource, f(s.MaxShareDiff), strconv.Itoa(s.OneSubflow), strconv.Itoa(s.NotNegotiated))
		for _, v := range s.Share {
			row = append(row, f(v))
		}
		for _, v := range s.EmuShare {
			row = append(row, f(v))
		}
		for _, p := range s.Paths {
			row = append(row, p.Impair)
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteText writes the summaries as an aligned table for a terminal.
func WriteText(w io.Writer, sums []CellSummary) error {
	impaired := false
	for _, s := range sums {
		for _, p := range s.Paths {
			impaired = impaired || p.Impair != ""
		}
	}
	fmt.Fprintf(w, "%4s %-13s %-7s %8s", "cell", "transport", "primary", "size")
	for _, n := range PathNames {
		fmt.Fprintf(w, " %9s %7s", n+" rtt", "loss")
	}
	fmt.Fprintf(w, " %5s %10s %19s %10s", "ok", "goodput", "p25-p75 Mbit/s", "complete")
	for _, n := range PathNames {
		fmt.Fprintf(w, " %7s", n)
	}
	if impaired {
		fmt.Fprint(w, "  impairments")
	}
	fmt.Fprintln(w)
	for _, s := range sums {
		fmt.Fprintf(w, "%4d %-13s %-7s %8s", s.Index, s.Transport, s.Primary, sizeText(s.Size))
		for _, p := range s.Paths {
			fmt.Fprintf(w, " %9v %6s%%", p.RTT, fmtPct(p.Loss))
		}
		fmt.Fprintf(w, " %2d/%-2d %10.2f %9.2f-%-9.2f %10v", s.OK, s.Runs, s.GoodputMedian/1e6, s.GoodputP25/1e6, s.GoodputP75/1e6,
			s.CompletionMedian.Round(time.Millisecond))
		for _, v := range s.Share {
			fmt.Fprintf(w, " %6.1f%%", v*100)
		}
		if impaired {
			// Cells differing only in impairment must not print alike.
			var im []string
			for _, p := range s.Paths {
				if p.Impair != "" {
					im = append(im, p.Name+":"+p.Impair)
				}
			}
			if len(im) == 0 {
				im = []string{"-"}
			}
			fmt.Fprint(w, "  "+strings.Join(im, " "))
		}
		fmt.Fprintln(w)
	}
	_, err := fmt.Fprintln(w, "goodput: median Mbit/s of successful runs; shares: mean of each run's per-path share (kernel subflow counters for MPTCP, emulator bytes otherwise)")
	return err
}

func sizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return strconv.FormatInt(n, 10)
}
