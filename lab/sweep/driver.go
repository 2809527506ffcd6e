package sweep

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Env is where a sweep runs: the lab (internal/cmd/lab/sweep) or a fake.
type Env interface {
	// Configure sets every path as in paths (PathNames order) without
	// tearing anything down.
	Configure(ctx context.Context, paths []PathConfig) error
	// EmuBytes returns the emulator's cumulative IP bytes delivered toward
	// the client per path (the download direction), the ground truth the
	// kernel's counters are checked against.
	EmuBytes() map[string]uint64
	// Transfer runs one bulk download of c.Size over c.Transport with
	// c.Primary as primary path.
	Transfer(ctx context.Context, c Cell, timeout time.Duration) (Transfer, error)
}

// Transfer is what one download measured (patterns.BulkResult and the
// record's per-path counters).
type Transfer struct {
	StartedAt  time.Time     `json:"started_at"`
	Status     string        `json:"status"`
	Error      string        `json:"error,omitempty"`
	Bytes      int64         `json:"bytes"`
	Setup      time.Duration `json:"setup_ns"`
	Completion time.Duration `json:"completion_ns"`
	GoodputBps float64       `json:"goodput_bps"`
	// MPTCP only: was it negotiated, and the most subflows seen (one
	// means the second path never joined: a lost MP_JOIN, not the
	// scheduler, kept it idle).
	MPTCPNegotiated *bool `json:"mptcp_negotiated,omitempty"`
	Subflows        int   `json:"subflows,omitempty"`
	// Kernel: bytes received per path from the transport's own per-path
	// counters (MPTCP subflows: path_shares); empty for a single-path
	// transport. Iface: the interfaces' rx byte counters over the test.
	Kernel map[string]uint64 `json:"-"`
	Iface  map[string]uint64 `json:"-"`
}

// PathResult is one path's bytes in one run.
type PathResult struct {
	Path string `json:"path"`
	// KernelBytes: payload bytes the kernel counted on this path's
	// subflow(s) (absent for a single-path transport).
	KernelBytes *uint64 `json:"kernel_bytes,omitempty"`
	// IfaceBytes: the client interface's rx bytes over the test.
	IfaceBytes uint64 `json:"iface_bytes"`
	// EmuBytes: IP bytes the lab's emulator delivered to the client on
	// this path during the run (ground truth; includes headers,
	// handshakes and retransmissions).
	EmuBytes uint64 `json:"emu_bytes"`
	// Share of the download this path carried: from KernelBytes when the
	// transport has per-path counters, else from EmuBytes.
	Share float64 `json:"share"`
}

// Result is one run, one JSON line ("sweep_run").
type Result struct {
	Type string `json:"type"`
	Cell
	Rep int `json:"rep"`
	Transfer
	PathBytes   []PathResult `json:"path_bytes"`
	ShareSource string       `json:"share_source"` // kernel or emulator
}

// Header is the first line of a sweep's output.
type Header struct {
	Type        string    `json:"type"` // sweep_header
	Spec        Spec      `json:"spec"`
	Fingerprint string    `json:"fingerprint"`
	Cells       int       `json:"cells"`
	Runs        int       `json:"runs"`
	StartedAt   time.Time `json:"started_at"`
	ResumedFrom string    `json:"resumed_from,omitempty"`
}

// Options of a sweep run.
type Options struct {
	Spec Spec
	Env  Env
	Out  io.Writer // JSON Lines: header, runs, cell summaries
	// Done are runs already recorded (from --resume), written first and
	// not run again.
	Done        []Result
	ResumedFrom string
	// Progress, when set, is called after each run.
	Progress func(Progress)
	// Settle is a pause after the paths change (0: none).
	Settle time.Duration
}

// Progress of a running sweep.
type Progress struct {
	Done, Total int
	Cell        Cell
	Elapsed     time.Duration
	ETA         time.Duration
}

// DefaultTimeout of one transfer.
const DefaultTimeout = 90 * time.Second

// Run runs every cell's repetitions not already in o.Done, writing each
// result as it is measured, then the cell summaries. It returns the
// summaries (of old and new runs together).
func Run(ctx context.Context, o Options) ([]CellSummary, error) {
	s := o.Spec
	cells := s.Cells()
	timeout := s.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	w := bufio.NewWriter(o.Out)
	emit := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		w.Write(b)
		w.WriteByte('\n')
		return w.Flush()
	}
	if err := emit(Header{Type: "sweep_header", Spec: s, Fingerprint: s.Fingerprint(), Cells: len(cells),
		Runs: len(cells) * s.Reps, StartedAt: time.Now().UTC(), ResumedFrom: o.ResumedFrom}); err != nil {
		return nil, err
	}
	byCell := make([][]Result, len(cells))
	have := map[[2]int]bool{}
	for _, r := range o.Done {
		if r.Index < 0 || r.Index >= len(cells) || cells[r.Index].Key() != r.Cell.Key() || r.Rep < 0 || r.Rep >= s.Reps {
			return nil, fmt.Errorf("resumed run cell %d rep %d is not in this sweep", r.Index, r.Rep)
		}
		k := [2]int{r.Index, r.Rep}
		if have[k] {
			return nil, fmt.Errorf("resumed runs hold cell %d rep %d twice", r.Index, r.Rep)
		}
		have[k] = true
		byCell[r.Index] = append(byCell[r.Index], r)
		if err := emit(r); err != nil {
			return nil, err
		}
	}
	total := len(cells)*s.Reps - len(have)
	done := 0
	start := time.Now()
	var last []PathConfig
	// Repetitions are the outer loop within one path setting so a slow
	// drift of the host hits every transport and size alike.
	for lo := 0; lo < len(cells); {
		hi := lo
		for hi < len(cells) && samePaths(cells[hi].Paths, cells[lo].Paths) {
			hi++
		}
		for rep := 0; rep < s.Reps; rep++ {
			for _, c := range cells[lo:hi] {
				if have[[2]int{c.Index, rep}] {
					continue
				}
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				if last == nil || !samePaths(last, c.Paths) {
					if err := o.Env.Configure(ctx, c.Paths); err != nil {
						return nil, fmt.Errorf("configure paths for cell %d: %w", c.Index, err)
					}
					last = c.Paths
					if o.Settle > 0 {
						select {
						case <-ctx.Done():
							return nil, ctx.Err()
						case <-time.After(o.Settle):
						}
					}
				}
				r, err := runOne(ctx, o.Env, c, rep, timeout)
				if err != nil {
					return nil, err
				}
				if err := emit(r); err != nil {
					return nil, err
				}
				byCell[c.Index] = append(byCell[c.Index], r)
				done++
				if o.Progress != nil {
					el := time.Since(start)
					o.Progress(Progress{Done: done, Total: total, Cell: c, Elapsed: el,
						ETA: time.Duration(float64(el) / float64(done) * float64(total-done))})
				}
			}
		}
		lo = hi
	}
	sums := make([]CellSummary, len(cells))
	for i, c := range cells {
		sums[i] = Summarise(c, byCell[i])
		if err := emit(sums[i]); err != nil {
			return nil, err
		}
	}
	return sums, nil
}

func samePaths(a, b []PathConfig) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func runOne(ctx context.Context, env Env, c Cell, rep int, timeout time.Duration) (Result, error) {
	before := env.EmuBytes()
	tr, err := env.Transfer(ctx, c, timeout)
	if err != nil {
		return Result{}, fmt.Errorf("cell %d rep %d: %w", c.Index, rep, err)
	}
	after := env.EmuBytes()
	r := Result{Type: "sweep_run", Cell: c, Rep: rep, Transfer: tr, ShareSource: "emulator"}
	var kTotal, eTotal uint64
	for _, p := range c.Paths {
		pr := PathResult{Path: p.Name, IfaceBytes: tr.Iface[p.Name], EmuBytes: after[p.Name] - before[p.Name]}
		if k, ok := tr.Kernel[p.Name]; ok {
			pr.KernelBytes = &k
			kTotal += k
		}
		eTotal += pr.EmuBytes
		r.PathBytes = append(r.PathBytes, pr)
	}
	if len(tr.Kernel) > 0 && kTotal > 0 {
		r.ShareSource = "kernel"
	}
	for i := range r.PathBytes {
		p := &r.PathBytes[i]
		switch {
		case r.ShareSource == "kernel" && p.KernelBytes != nil:
			p.Share = float64(*p.KernelBytes) / float64(kTotal)
		case r.ShareSource == "emulator" && eTotal > 0:
			p.Share = float64(p.EmuBytes) / float64(eTotal)
		}
	}
	return r, nil
}

// ReadResume reads an earlier sweep's output: its header must have the
// spec's fingerprint; its runs are returned. A last line cut short by an
// interruption is dropped; any other bad line is an error naming it.
func ReadResume(r io.Reader, s Spec) ([]Result, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var out []Result
	var pendingErr error
	line, sawHeader := 0, false
	for sc.Scan() {
		line++
		if pendingErr != nil {
			return nil, pendingErr
		}
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var t struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(b, &t); err != nil {
			pendingErr = fmt.Errorf("line %d: %v", line, err)
			continue
		}
		switch t.Type {
		case "sweep_header":
			var h Header
			if err := json.Unmarshal(b, &h); err != nil {
				return nil, fmt.Errorf("line %d: %v", line, err)
			}
			if h.Fingerprint != s.Fingerprint() {
				return nil, fmt.Errorf("line %d: %w (fingerprint %s, this sweep's %s)", line, ErrOtherSweep, h.Fingerprint, s.Fingerprint())
			}
			sawHeader = true
		case "sweep_run":
			if !sawHeader {
				return nil, fmt.Errorf("line %d: run before the sweep_header", line)
			}
			var res Result
			if err := json.Unmarshal(b, &res); err != nil {
				pendingErr = fmt.Errorf("line %d: %v", line, err)
				continue
			}
			out = append(out, res)
		case "sweep_cell":
		default:
			return nil, fmt.Errorf("line %d: unknown record type %q", line, t.Type)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !sawHeader {
		return nil, errors.New("no sweep_header: not a sweep output")
	}
	return out, nil
}

// ErrOtherSweep: --resume names the output of a different grid.
var ErrOtherSweep = errors.New("resume file is of another sweep")
