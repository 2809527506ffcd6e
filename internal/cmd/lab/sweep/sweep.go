// Package sweep implements `mptester lab sweep` (a grid of path settings
// x transfers, package lab/sweep) and its in-namespace `sweep-worker`.
package sweep

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/internal/certs"
	"github.com/mptester/mptester/internal/cmd/lab/shared"
	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/emu"
	"github.com/mptester/mptester/lab/sweep"
	"github.com/mptester/mptester/patterns"
	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/probe"
)

// SweepOptions for `mptester lab sweep`.
type SweepOptions struct {
	IO     *cmdutil.IOStreams
	Logger *slog.Logger
	shared.Where
	Preset string
	Quick  bool
	File   string
	// Overrides of the preset or file (flags for the common case).
	Sizes      []string
	Transports []string
	Primaries  []string
	Reps       int
	WWANRTT    []string
	WWANLoss   []string
	Timeout    time.Duration
	Output     string
	CSV        string
	Resume     string
	Settle     time.Duration
	// Exe is the mptester binary run in the client namespace (default:
	// this one).
	Exe     string
	changed func(string) bool
}

// NewCmdSweep builds `lab sweep`.
func NewCmdSweep(f *cmdutil.Factory, runF func(context.Context, *SweepOptions) error) *cobra.Command {
	opts := &SweepOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "sweep",
		Short: "Run a grid of path settings x transfer sizes x transports in a lab (study 004 §IV)",
		Long: `Bring up a lab, then for every cell of a grid (per path: delay, jitter,
loss, rate; per run: transfer size, transport, primary path) run the bulk
download pattern the given number of times, changing the emulated paths
between cells without tearing the lab down. Each run is one JSON line with
the paths' settings, the goodput, the completion time and the bytes per
path from the transport's per-path kernel counters (MPTCP subflows) and
from the lab's emulator; the cells' summaries (goodput median and
interquartile spread, traffic share per path, completion time) follow,
as a table on stdout (when --output is a file) and as CSV (--csv).

The grid comes from a preset, a sweep file (YAML) or the flags below,
which also override a preset's or file's values. Presets:
` + sweep.PresetHelp() + `
A sweep file:

  name: my-sweep
  paths:
    wlan0: {rtt: [20ms], loss: ["0.1%"]}
    wwan0: {rtt: [20ms, 100ms, 300ms], jitter: [2ms], loss: ["0.1%"], rate: [50mbit],
            impair: ["", "strip=mptcp", "block=udp/443"]}
  sizes: [128KiB, 2MiB]
  transports: [mptcp, tcp]
  primaries: [wlan0, wwan0]
  repetitions: 10

(delay: one-way, or rtt: twice that; loss in % or as a probability;
impair: a path's whole middlebox setting per cell in lab set syntax, "" clean.)
--resume OLD copies OLD's runs into the new output and runs only the rest.`,
		Example: `  sudo mptester lab sweep --preset 004-rtt --quick -o rtt.jsonl --csv rtt.csv
  sudo mptester lab sweep --preset 004-loss -o loss.jsonl
  sudo mptester lab sweep --preset 004-loss --resume loss.jsonl -o loss2.jsonl
  sudo mptester lab sweep --wwan0-rtt 20ms,200ms --sizes 1MiB --reps 5 -o mine.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Logger = f.Logger
			opts.changed = cmd.Flags().Changed
			return cmdutil.Dispatch(cmd.Context(), opts, runF, sweepRun)
		},
	}
	opts.Where.Flags(cmd)
	_ = cmd.Flags().Set("name", "sweep")
	cmd.Flags().Lookup("name").DefValue = "sweep"
	fl := cmd.Flags()
	fl.StringVar(&opts.Preset, "preset", "", "built-in `PRESET`: "+strings.Join(sweep.PresetNames(), ", "))
	fl.BoolVar(&opts.Quick, "quick", false, "the preset's small variant (a few cells, 3 repetitions) for demos and CI")
	fl.StringVar(&opts.File, "file", "", "sweep `FILE` (YAML)")
	fl.StringSliceVar(&opts.Sizes, "sizes", nil, "transfer `SIZES`, e.g. 128KiB,2MiB")
	fl.StringSliceVar(&opts.Transports, "transports", nil, "`TRANSPORTS` compared (default mptcp,tcp): "+strings.Join(transport.Names(), ", "))
	fl.StringSliceVar(&opts.Primaries, "primaries", nil, "primary `PATHS` (default wlan0)")
	fl.IntVar(&opts.Reps, "reps", 0, "repetitions per cell (default 3 without a preset or file)")
	fl.StringSliceVar(&opts.WWANRTT, "wwan0-rtt", nil, "path 2 (wwan0) `RTTS` swept (default 20ms; wlan0 stays at 20ms)")
	fl.StringSliceVar(&opts.WWANLoss, "wwan0-loss", nil, "path 2 (wwan0) `LOSSES` swept, e.g. 0%,5%")
	fl.DurationVar(&opts.Timeout, "timeout", 0, "limit on one transfer (default 90s)")
	fl.StringVarP(&opts.Output, "output", "o", "-", "JSON Lines `FILE` of the runs and cell summaries (- for stdout)")
	fl.StringVar(&opts.CSV, "csv", "", "write the cell summaries as CSV to `FILE`")
	fl.StringVar(&opts.Resume, "resume", "", "continue the interrupted sweep whose output is `OLD`")
	fl.DurationVar(&opts.Settle, "settle", 200*time.Millisecond, "pause after the paths change, so queued packets of the old setting drain")
	return cmd
}

// spec builds the grid from the preset or file and the flags.
func (o *SweepOptions) spec() (sweep.Spec, error) {
	var s sweep.Spec
	switch {
	case o.Preset != "" && o.File != "":
		return s, cmdutil.FlagErrorf("--preset and --file exclude each other")
	case o.Quick && o.Preset == "":
		return s, cmdutil.FlagErrorf("--quick needs --preset")
	case o.Preset != "":
		p, err := sweep.GetPreset(o.Preset, o.Quick)
		if err != nil {
			return s, cmdutil.FlagErrorf("--preset: %v", err)
		}
		s = p
	case o.File != "":
		b, err := os.ReadFile(o.File)
		if err != nil {
			return s, cmdutil.FlagErrorf("--file: %v", err)
		}
		if s, err = sweep.Parse(b); err != nil {
			return s, cmdutil.FlagErrorf("--file %s: %v", o.File, err)
		}
	default:
		s = sweep.Spec{Name: "flags", Paths: map[string]sweep.PathGrid{
			"wlan0": {Delay: []time.Duration{10 * time.Millisecond}},
			"wwan0": {Delay: []time.Duration{10 * time.Millisecond}},
		}, Sizes: []int64{1 << 20}, Transports: []string{"mptcp", "tcp"}, Primaries: []string{"wlan0"}, Reps: 3}
	}
	s.Paths = clonePaths(s.Paths)
	var err error
	if len(o.Sizes) > 0 {
		if s.Sizes, err = sweep.ParseList("--sizes", o.Sizes, sweep.ParseSize); err != nil {
			return s, cmdutil.FlagErrorf("%v", err)
		}
	}
	g := s.Paths["wwan0"]
	if len(o.WWANRTT) > 0 {
		if g.Delay, err = sweep.ParseList("--wwan0-rtt", o.WWANRTT, sweep.ParseRTT); err != nil {
			return s, cmdutil.FlagErrorf("%v", err)
		}
	}
	if len(o.WWANLoss) > 0 {
		if g.Loss, err = sweep.ParseList("--wwan0-loss", o.WWANLoss, sweep.ParseLoss); err != nil {
			return s, cmdutil.FlagErrorf("%v", err)
		}
	}
	s.Paths["wwan0"] = g
	if len(o.Transports) > 0 {
		s.Transports = o.Transports
	}
	if len(o.Primaries) > 0 {
		s.Primaries = o.Primaries
	}
	if o.changed != nil && o.changed("reps") || o.Reps != 0 {
		s.Reps = o.Reps
	}
	if o.Timeout != 0 {
		s.Timeout = o.Timeout
	}
	if err := s.Validate(); err != nil {
		return s, cmdutil.FlagErrorf("%v", err)
	}
	return s, nil
}

func clonePaths(m map[string]sweep.PathGrid) map[string]sweep.PathGrid {
	out := map[string]sweep.PathGrid{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func sweepRun(ctx context.Context, opts *SweepOptions) error {
	if err := opts.Where.Resolve(); err != nil {
		return err
	}
	spec, err := opts.spec()
	if err != nil {
		return err
	}
	if opts.Settle < 0 {
		return cmdutil.FlagErrorf("--settle must be >= 0")
	}
	for _, o := range []struct{ flag, path string }{{"--output", opts.Output}, {"--csv", opts.CSV}} {
		if err := cmdutil.CheckOutput(o.path, opts.Resume); err != nil {
			return cmdutil.FlagErrorf("%s: %v", o.flag, err)
		}
	}
	if opts.CSV == "-" {
		return cmdutil.FlagErrorf("--csv: give a file")
	}
	var done []sweep.Result
	if opts.Resume != "" {
		f, err := os.Open(opts.Resume)
		if err != nil {
			return cmdutil.FlagErrorf("--resume: %v", err)
		}
		done, err = sweep.ReadResume(f, spec)
		f.Close()
		if err != nil {
			return cmdutil.FlagErrorf("--resume %s: %v", opts.Resume, err)
		}
	}
	exe := opts.Exe
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return err
		}
	}

	t0 := time.Now()
	l, err := lab.Up(ctx, lab.Options{Name: opts.Name, Dir: opts.Dir, Seed: 1, WorldSeed: 1, Logger: opts.Logger})
	if err != nil {
		return shared.MapErr(err)
	}
	defer l.Close()
	stopServe, err := shared.StartTestServer(ctx, l, opts.Logger)
	if err != nil {
		return err
	}
	defer stopServe()
	info := l.Info()
	if err := prepareSweepLab(ctx, info, spec); err != nil {
		return err
	}
	w, err := startWorker(ctx, info, exe, info.TestServer.Fingerprint, opts.Logger)
	if err != nil {
		return err
	}
	defer w.close()
	setup := time.Since(t0)
	opts.Logger.Info("sweep lab up", "setup", setup, "cells", len(spec.Cells()), "runs", spec.Runs(), "resumed", len(done))

	out, closeOut, err := cmdutil.CreateOutput("--output", opts.Output, opts.IO.Out)
	if err != nil {
		return err
	}
	defer closeOut()
	env := &labEnv{l: l, w: w}
	var progress func(sweep.Progress)
	if opts.IO.IsStderrTTY() {
		progress = func(p sweep.Progress) {
			fmt.Fprintf(opts.IO.ErrOut, "\r\x1b[Ksweep: %d/%d runs, cell %d (%s %s %s, wwan0 %s), %v elapsed, ETA %v",
				p.Done, p.Total, p.Cell.Index, p.Cell.Transport, p.Cell.Primary, humanSize(p.Cell.Size), p.Cell.Paths[1].Settings(),
				p.Elapsed.Round(time.Second), p.ETA.Round(time.Second))
			if p.Done == p.Total {
				fmt.Fprintln(opts.IO.ErrOut)
			}
		}
	}
	sums, err := sweep.Run(ctx, sweep.Options{Spec: spec, Env: env, Out: out, Done: done, ResumedFrom: opts.Resume,
		Progress: progress, Settle: opts.Settle})
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: sweep interrupted; continue with --resume %s", cmdutil.ErrCancelled, opts.Output)
		}
		return err
	}
	if err := closeOut(); err != nil {
		return err
	}
	if opts.CSV != "" {
		f, err := os.Create(opts.CSV)
		if err != nil {
			return err
		}
		if err := sweep.WriteCSV(f, sums); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	if opts.Output != "-" && opts.Output != "" {
		if err := sweep.WriteText(opts.IO.Out, sums); err != nil {
			return err
		}
	}
	// The driver's own cost: what the wall time holds beyond the lab's
	// setup, the settle pauses and the transfers' own durations.
	wall := time.Since(t0)
	settle := time.Duration(env.configs) * opts.Settle
	var perRun time.Duration
	if env.n > 0 {
		perRun = (wall - setup - settle - env.ownTime) / time.Duration(env.n)
	}
	opts.Logger.Info("sweep done", "runs", env.n, "wall", wall, "setup", setup, "settle", settle,
		"transfers_own", env.ownTime, "worker_round_trips", env.transferTime, "overhead_per_run", perRun)
	failed := 0
	for _, s := range sums {
		failed += s.Runs - s.OK
	}
	if failed > 0 {
		return fmt.Errorf("%w: %d of %d runs failed", cmdutil.ErrPartial, failed, spec.Runs())
	}
	return nil
}

func humanSize(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	if n%(1<<10) == 0 {
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprint(n)
}

// prepareSweepLab: no cached TCP metrics between runs (the kernel would
// start a repetition with the previous one's ssthresh and RTT, so runs
// would not be independent), and with wwan0 as a primary, wlan0 is an
// MPTCP subflow endpoint too (the lab announces only wwan0), so MPTCP
// has both paths whichever one it starts on.
func prepareSweepLab(ctx context.Context, info lab.Info, s sweep.Spec) error {
	run := func(side string, argv ...string) error {
		cmd, err := lab.Command(ctx, info, side, argv...)
		if err != nil {
			return err
		}
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, b)
		}
		return nil
	}
	for _, side := range []string{"client", "server"} {
		if err := run(side, "sysctl", "-q", "-w", "net.ipv4.tcp_no_metrics_save=1"); err != nil {
			return err
		}
	}
	for _, p := range s.Primaries {
		if p != "wwan0" {
			continue
		}
		w, _ := lab.Plan("wlan0")
		if err := run("client", "ip", "mptcp", "endpoint", "add", w.Client4.String(), "dev", "wlan0", "subflow"); err != nil {
			return err
		}
	}
	return nil
}

// labEnv runs a sweep's cells in the lab: paths set on the emulators,
// transfers by the worker in the client namespace.
type labEnv struct {
	l            *lab.Lab
	w            *worker
	n            int
	transferTime time.Duration // the driver's round trips to the worker
	ownTime      time.Duration // the transfers' own setup + completion
	configs      int           // path settings applied (each one is a settle pause)
}

// Configure sets both directions of each path exactly (no burst loss, the
// default queue) and reads the emulator back: a cell's recorded settings
// are the ones the emulator applied.
func (e *labEnv) Configure(_ context.Context, paths []sweep.PathConfig) error {
	e.configs++
	for _, p := range paths {
		d, j, l, r, q := p.Delay, p.Jitter, p.Loss, p.RateBps, 0
		var ge *emu.GilbertElliott
		fc := emu.FieldChange{Delay: &d, Jitter: &j, Loss: &l, RateBps: &r, QueueBytes: &q, GE: &ge}
		if err := e.l.Set(p.Name, emu.Change{Dir: [2]emu.FieldChange{fc, fc}}); err != nil {
			return err
		}
		// Every cell sets its whole impairment (a clean one clears the
		// previous cell's rules); checked at load, so an error here is the
		// lab's (nft missing, ...).
		ic, err := lab.ParseImpairSetting(p.Impair)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		if err := e.l.Impair(p.Name, ic); err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		want := emu.Params{Delay: d, Jitter: j, Loss: l, RateBps: r}
		for _, dir := range []emu.Direction{emu.Up, emu.Down} {
			if got := e.l.Link(p.Name).Params(dir); got != want {
				return fmt.Errorf("%s: the emulator has %v, want %v", p.Name, got, want)
			}
		}
	}
	return nil
}

func (e *labEnv) EmuBytes() map[string]uint64 {
	out := map[string]uint64{}
	for _, n := range lab.PathNames {
		if link := e.l.Link(n); link != nil {
			out[n] = link.Stats().Down.BytesDelivered
		}
	}
	return out
}

func (e *labEnv) Transfer(ctx context.Context, c sweep.Cell, timeout time.Duration) (sweep.Transfer, error) {
	t0 := time.Now()
	tr, err := e.w.transfer(ctx, workerRequest{Transport: c.Transport, Primary: c.Primary, Size: c.Size, Timeout: timeout})
	e.n++
	e.transferTime += time.Since(t0)
	e.ownTime += tr.Setup + tr.Completion
	return tr, err
}

// workerRequest is one transfer the worker runs.
type workerRequest struct {
	Transport string        `json:"transport"`
	Primary   string        `json:"primary"`
	Size      int64         `json:"size"`
	Timeout   time.Duration `json:"timeout_ns"`
}

// worker is `mptester lab sweep-worker` in the client namespace: one
// process for the whole sweep, a request and a record per line.
type worker struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *tailBuffer
	once   sync.Once
}

func startWorker(ctx context.Context, info lab.Info, exe, pin string, log *slog.Logger) (*worker, error) {
	cmd, err := lab.Command(ctx, info, "client", exe, "lab", "sweep-worker", "--pin", pin)
	if err != nil {
		return nil, err
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	w := &worker{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20), stderr: &tailBuffer{max: 8 << 10}}
	cmd.Stderr = w.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("sweep worker: %w", err)
	}
	return w, nil
}

func (w *worker) transfer(ctx context.Context, r workerRequest) (sweep.Transfer, error) {
	b, _ := json.Marshal(r)
	if _, err := w.in.Write(append(b, '\n')); err != nil {
		return sweep.Transfer{}, fmt.Errorf("sweep worker: %w (%s)", err, w.stderr)
	}
	line, err := w.out.ReadBytes('\n')
	if err != nil {
		if ctx.Err() != nil {
			return sweep.Transfer{}, ctx.Err()
		}
		return sweep.Transfer{}, fmt.Errorf("sweep worker: %w (%s)", err, w.stderr)
	}
	return decodeRecord(line)
}

// decodeRecord reads a pattern_test record of the bulk pattern.
func decodeRecord(line []byte) (sweep.Transfer, error) {
	var rec struct {
		StartedAt  time.Time               `json:"started_at"`
		Status     string                  `json:"status"`
		Error      string                  `json:"error"`
		Result     *patterns.BulkResult    `json:"result"`
		PathBytes  []patterns.PathBytes    `json:"path_bytes"`
		PathShares []patterns.PathShare    `json:"path_shares"`
		MPTCP      *transport.MPTCPSummary `json:"mptcp"` // the transport's summary, under its key
		Failure    string                  `json:"worker_error"`
	}
	if err := json.Unmarshal(line, &rec); err != nil {
		return sweep.Transfer{}, fmt.Errorf("sweep worker: bad record: %v", err)
	}
	if rec.Failure != "" {
		return sweep.Transfer{}, fmt.Errorf("sweep worker: %s", rec.Failure)
	}
	t := sweep.Transfer{StartedAt: rec.StartedAt, Status: rec.Status, Error: rec.Error, Kernel: map[string]uint64{}, Iface: map[string]uint64{}}
	if r := rec.Result; r != nil {
		t.Bytes, t.Setup, t.Completion, t.GoodputBps = r.Bytes, r.Setup, r.Completion, r.GoodputBps
	}
	if m := rec.MPTCP; m != nil {
		t.MPTCPNegotiated, t.Subflows = m.Negotiated, m.Subflows
	}
	for _, p := range rec.PathBytes {
		t.Iface[p.Path] = p.Received
	}
	for _, p := range rec.PathShares {
		t.Kernel[p.Path] += p.Received
	}
	return t, nil
}

func (w *worker) close() {
	w.once.Do(func() {
		w.in.Close()
		done := make(chan struct{})
		go func() { _ = w.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = w.cmd.Process.Kill()
			<-done
		}
	})
}

// tailBuffer keeps the last max bytes written (the worker's stderr, for
// errors).
type tailBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

// SweepWorkerOptions for the hidden `lab sweep-worker`.
type SweepWorkerOptions struct {
	IO     *cmdutil.IOStreams
	In     io.Reader
	Logger *slog.Logger
	Pin    string
}

// NewCmdSweepWorker builds the hidden `lab sweep-worker`, which `lab
// sweep` runs in the client namespace.
func NewCmdSweepWorker(f *cmdutil.Factory, runF func(context.Context, *SweepWorkerOptions) error) *cobra.Command {
	opts := &SweepWorkerOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:    "sweep-worker",
		Short:  "Run bulk downloads for lab sweep (in the lab's client namespace)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Logger = f.Logger
			opts.In = cmd.InOrStdin()
			return cmdutil.Dispatch(cmd.Context(), opts, runF, sweepWorkerRun)
		},
	}
	cmd.Flags().StringVar(&opts.Pin, "pin", "", "SHA-256 `FINGERPRINT` of the lab's test server")
	return cmd
}

// sweepWorkerRun reads requests and answers each with the bulk pattern's
// record (patterns.RunTest, as `mptester run` records a test), or a
// {"worker_error"} line when the request cannot be run at all.
func sweepWorkerRun(ctx context.Context, opts *SweepWorkerOptions) error {
	paths, err := probe.Discover(ctx, probe.DiscoverOptions{})
	if err != nil {
		return err
	}
	tlsCfg, err := certs.ClientTLS(lab.Server4.String(), opts.Pin, opts.Pin == "")
	if err != nil {
		return cmdutil.FlagErrorf("--pin: %v", err)
	}
	enc := json.NewEncoder(opts.IO.Out)
	sc := bufio.NewScanner(opts.In)
	for sc.Scan() {
		var r workerRequest
		var rec any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			rec = map[string]string{"worker_error": err.Error()}
		} else if rec, err = workerTransfer(ctx, paths, tlsCfg.Clone(), r, opts.Logger); err != nil {
			rec = map[string]string{"worker_error": err.Error()}
		}
		if err := enc.Encode(rec); err != nil {
			return err
		}
	}
	return sc.Err()
}

func workerTransfer(ctx context.Context, all []probe.Path, tlsCfg *tls.Config, r workerRequest, log *slog.Logger) (any, error) {
	d, err := transport.Get(r.Transport)
	if err != nil {
		return nil, err
	}
	prim, err := probe.FindPath(all, r.Primary)
	if err != nil {
		return nil, err
	}
	roles := []transport.PathRole{{Path: prim, Role: transport.RolePrimary}}
	cfgPaths := []patterns.PathRole{{Name: prim.Name, Role: transport.RolePrimary}}
	if d.Multipath {
		for _, n := range lab.PathNames {
			if n == prim.Name {
				continue
			}
			p, err := probe.FindPath(all, n)
			if err != nil {
				return nil, err
			}
			roles = append(roles, transport.PathRole{Path: p, Role: transport.RoleAvailable})
			cfgPaths = append(cfgPaths, patterns.PathRole{Name: n, Role: transport.RoleAvailable})
		}
	}
	tr, err := transport.New(r.Transport, transport.Options{Paths: roles, Family: probe.Family4, TLS: tlsCfg})
	if err != nil {
		return nil, err
	}
	port := d.DefaultPort
	if ld, err := transport.Get(d.Listener()); err == nil {
		port = ld.DefaultPort
	}
	cfg := patterns.TestConfig{Pattern: "bulk", Transport: r.Transport, Path: prim.Name, Paths: cfgPaths, Family: 4,
		Server: netip.AddrPortFrom(lab.Server4, port), Params: patterns.Params{Size: r.Size}, Timeout: r.Timeout,
		ConnectTimeout: 10 * time.Second}
	rec := patterns.RunTest(ctx, tr, cfg, lab.PathNames, log)
	if errors.Is(ctx.Err(), context.Canceled) {
		return nil, ctx.Err()
	}
	return rec, nil
}
