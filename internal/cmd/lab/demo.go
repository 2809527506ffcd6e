package lab

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/emu"
	"github.com/mptester/mptester/lab/world"
	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/survey"
)

// DemoOptions for `mptester lab demo`.
type DemoOptions struct {
	IO     *cmdutil.IOStreams
	Logger *slog.Logger
	Where
	Build BuildOptions
	// Exe is the mptester binary run inside the lab (default: this one).
	Exe string
}

// NewCmdDemo builds `lab demo`.
func NewCmdDemo(f *cmdutil.Factory, runF func(context.Context, *DemoOptions) error) *cobra.Command {
	opts := &DemoOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Bring up a default lab, survey it, compare with the ground truth, tear it down",
		Long: `Bring up a lab with a generated world, run 'mptester survey' from its
client (both paths, the lab's per-path DNS), compare the survey's summary
with the world's ground truth (truth.json) and print both, then tear the
lab down. Takes well under a minute. The survey output and the lab's files
stay in the lab directory.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Logger = f.Logger
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return demoRun(cmd.Context(), opts)
		},
	}
	opts.Where.flags(cmd)
	opts.Build.flags(cmd)
	_ = cmd.Flags().Set("name", "demo")
	cmd.Flags().Lookup("name").DefValue = "demo"
	_ = cmd.Flags().Set("domains", "100")
	cmd.Flags().Lookup("domains").DefValue = "100"
	return cmd
}

func demoRun(ctx context.Context, opts *DemoOptions) error {
	t0 := time.Now()
	if err := opts.Where.resolve(); err != nil {
		return err
	}
	lo, err := opts.Build.labOptions(opts.Where)
	if err != nil {
		return err
	}
	lo.Logger = opts.Logger
	exe := opts.Exe
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return err
		}
	}
	out := opts.IO.Out
	l, err := lab.Up(ctx, lo)
	if err != nil {
		return mapErr(err)
	}
	defer l.Close()
	info := l.Info()
	fmt.Fprintf(out, "Lab %q up in %v: client namespace %s, Internet namespace %s\n",
		info.Name, time.Since(t0).Round(time.Millisecond), info.Namespaces.Client, info.Namespaces.Internet)
	for _, p := range info.Paths {
		st := l.Link(p.Name).Params(emu.Up)
		fmt.Fprintf(out, "  %-6s %s, %s  resolver %s  metric %d  %s\n", p.Name, p.Client4, p.Client6, p.Resolv4, p.Metric, st)
	}
	fmt.Fprintf(out, "World: seed %d, %d domains (%s); ground truth %s\n\n", info.WorldSeed, info.Domains, info.Files.Tranco, info.Files.Truth)

	for _, p := range info.Paths {
		rtt, err := pingMedian(ctx, info, p.Name, lab.Server4.String())
		if err != nil {
			fmt.Fprintf(out, "ping %s via %s: %v\n", lab.Server4, p.Name, err)
			continue
		}
		fmt.Fprintf(out, "ping %s via %-6s median RTT %6.2f ms (emulated %v)\n", lab.Server4, p.Name, rtt, 2*l.World().BaseDelayOf(p.Name))
	}

	jsonl := filepath.Join(info.Dir, "survey.jsonl")
	args := []string{exe, "survey", "--list", info.Files.Tranco, "--top", strconv.Itoa(info.Domains),
		"--paths", "wlan0,wwan0", "--count", "3", "--timeout", "800ms", "--spacing", "10ms", "--rate", "500",
		"--dns-timeout", "700ms", "--dns-retries", "1", "--output", jsonl}
	fmt.Fprintf(out, "\n$ mptester lab exec -- mptester survey --list %s --top %d --paths wlan0,wwan0 --count 3 ...\n",
		filepath.Base(info.Files.Tranco), info.Domains)
	cmd, err := lab.Command(ctx, info, "client", args...)
	if err != nil {
		return err
	}
	var serr bytes.Buffer
	cmd.Stderr = &serr
	st := time.Now()
	runErr := cmd.Run()
	var ee *exec.ExitError
	if runErr != nil && !(errors.As(runErr, &ee) && ee.ExitCode() == cmdutil.ExitPartial) {
		fmt.Fprintf(opts.IO.ErrOut, "%s", tail(serr.Bytes(), 2000))
		return fmt.Errorf("survey in the lab failed: %w", runErr)
	}
	got, err := readSummary(jsonl)
	if err != nil {
		return err
	}
	tr, err := l.World().Truth(world.ExpectOptions{})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "survey finished in %v (status %s); output %s\n\n", time.Since(st).Round(time.Millisecond), got.Status, jsonl)
	printComparison(out, got, &tr.Summary)

	patErr := demoPatterns(ctx, out, l, exe)
	if patErr != nil {
		fmt.Fprintf(out, "pattern run: %v\n", patErr)
	}
	if err := l.Close(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nLab %q torn down; whole demo took %v.\n", info.Name, time.Since(t0).Round(time.Millisecond))
	if patErr != nil {
		return fmt.Errorf("%w: the pattern run failed: %w", cmdutil.ErrPartial, patErr)
	}
	return nil
}

// demoPort is where the demo's `mptester serve` listens (443 is taken by
// the lab's own handshake server on every address).
const demoPort = "8443"

// demoPatterns rate-limits the paths like a Wi-Fi and a cellular link,
// starts `mptester serve` in the Internet namespace and runs a short
// pattern matrix (ping, bulk over TCP, MPTCP and QUIC on both paths).
func demoPatterns(ctx context.Context, out io.Writer, l *lab.Lab, exe string) error {
	info := l.Info()
	for path, settings := range map[string][]string{"wlan0": {"rate=40mbit"}, "wwan0": {"rate=20mbit"}} {
		c, err := emu.ParseChange(settings)
		if err != nil {
			return err
		}
		if err := l.Set(path, c); err != nil {
			return err
		}
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	srv, err := lab.Command(sctx, info, "server", exe, "serve", "--listen", lab.Server4.String(),
		"--tcp-port", demoPort, "--quic-port", demoPort, "--log-level", "warn")
	if err != nil {
		return err
	}
	srvOut, err := srv.StdoutPipe()
	if err != nil {
		return err
	}
	var srvErr bytes.Buffer
	srv.Stderr = &srvErr
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() {
		_ = srv.Process.Signal(syscall.SIGTERM)
		_ = srv.Wait()
	}()
	// serve prints its listeners once they are open.
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(srvOut)
		ok := false
		for sc.Scan() {
			if !ok && bytes.HasPrefix(sc.Bytes(), []byte("quic ")) {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			return fmt.Errorf("mptester serve did not start: %s", tail(srvErr.Bytes(), 500))
		}
	case <-time.After(10 * time.Second):
		return errors.New("mptester serve did not start within 10s")
	}
	doc := filepath.Join(info.Dir, "run.json")
	fmt.Fprintf(out, "\nPaths now rate-limited: wlan0 40 Mbit/s, wwan0 20 Mbit/s. In the Internet namespace: mptester serve on %s:%s\n", lab.Server4, demoPort)
	fmt.Fprintf(out, "$ mptester lab exec -- mptester run --server %s --tcp-port %s --quic-port %s --insecure --patterns ping,bulk --size 2000000 ...\n",
		lab.Server4, demoPort, demoPort)
	cmd, err := lab.Command(ctx, info, "client", exe, "run", "--server", lab.Server4.String(),
		"--tcp-port", demoPort, "--quic-port", demoPort, "--quic-alt-port", "0", "--insecure",
		"--paths", "wlan0,wwan0", "--patterns", "ping,bulk", "--transports", "tcp,mptcp,quic",
		"--size", "2000000", "--ping-count", "5", "--pace", "50ms", "--seed", "1", "--log-level", "warn", "-o", doc)
	if err != nil {
		return err
	}
	var rerr bytes.Buffer
	cmd.Stderr = &rerr
	st := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%v: %s", err, tail(rerr.Bytes(), 1000))
	}
	b, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	var d runDoc
	if err := json.Unmarshal(b, &d); err != nil {
		return fmt.Errorf("%s: %w", doc, err)
	}
	fmt.Fprintf(out, "pattern run finished in %v (status %s); output %s\n\n", time.Since(st).Round(time.Millisecond), d.Status, doc)
	slices.SortStableFunc(d.Records, func(a, b runRecord) int {
		return cmp.Or(cmp.Compare(a.Config.Pattern, b.Config.Pattern), cmp.Compare(a.Config.Path, b.Config.Path),
			cmp.Compare(a.Config.Transport, b.Config.Transport))
	})
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PATTERN\tPATH\tTRANSPORT\tSTATUS\tRESULT\tRECEIVED wlan0 / wwan0")
	for _, r := range d.Records {
		res := r.Error
		switch {
		case r.Result.MedianNS > 0:
			res = fmt.Sprintf("median %.1f ms", r.Result.MedianNS/1e6)
		case r.Result.GoodputBPS > 0:
			res = fmt.Sprintf("%.1f Mbit/s", r.Result.GoodputBPS/1e6)
		}
		rx := map[string]int64{}
		for _, pb := range r.PathBytes {
			rx[pb.Path] = pb.BytesReceived
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s / %s\n", r.Config.Pattern, r.Config.Path, r.Config.Transport, r.Status, res,
			humanBytes(rx["wlan0"]), humanBytes(rx["wwan0"]))
	}
	return tw.Flush()
}

// runDoc is the part of `mptester run`'s JSON document the demo prints.
type runDoc struct {
	Status  string      `json:"status"`
	Records []runRecord `json:"records"`
}

type runRecord struct {
	Config struct {
		Pattern   string `json:"pattern"`
		Transport string `json:"transport"`
		Path      string `json:"path"`
	} `json:"config"`
	Status string `json:"status"`
	Error  string `json:"error"`
	Result struct {
		MedianNS   float64 `json:"median_ns"`
		GoodputBPS float64 `json:"goodput_bps"`
	} `json:"result"`
	PathBytes []struct {
		Path          string `json:"path"`
		BytesReceived int64  `json:"bytes_received"`
	} `json:"path_bytes"`
}

func humanBytes(n int64) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}

// pingMedian sends 5 ICMP echo requests to addr through dev in the client
// namespace with mptester's own ICMP prober (the survey's icmp method), so
// the demo needs no system ping. The prober's sockets are opened on a
// thread inside the namespace and keep it.
func pingMedian(ctx context.Context, info lab.Info, dev, addr string) (float64, error) {
	target, err := netip.ParseAddr(addr)
	if err != nil {
		return 0, err
	}
	var xs []float64
	err = lab.InNS(info.Namespaces.Client, func() error {
		ifc, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		p := probe.Path{Name: dev, Index: ifc.Index, Up: true}
		if plan, ok := info.Plan(dev); ok {
			for _, a := range []netip.Addr{plan.Client4, plan.Client6} {
				p.Addrs = append(p.Addrs, probe.Addr{IP: a, Scope: probe.ScopeOf(a)})
			}
		}
		pr, err := survey.NewProber(ctx, "icmp", p, survey.ProberOptions{})
		if err != nil {
			return err
		}
		defer pr.Close()
		for i := 0; i < 5; i++ {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			r := pr.Probe(pctx, survey.Target{Addr: target})
			cancel()
			if r.Kind == survey.AnswerEchoReply {
				xs = append(xs, float64(r.RTT)/float64(time.Millisecond))
			}
			time.Sleep(50 * time.Millisecond)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if len(xs) == 0 {
		return 0, errors.New("no replies")
	}
	return world.Percentile(sortedCopy(xs), 50), nil
}

func sortedCopy(xs []float64) []float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// readSummary finds the "summary" record of a survey's JSON Lines.
func readSummary(path string) (*survey.Summary, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if !bytes.Contains(sc.Bytes(), []byte(`"summary"`)) {
			continue
		}
		var s survey.Summary
		if json.Unmarshal(sc.Bytes(), &s) == nil && s.Type == "summary" {
			return &s, nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%s: no summary record", path)
}

// printComparison puts the survey's findings next to the ground truth.
func printComparison(w io.Writer, got, want *survey.Summary) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOLUTION\tDOMAINS\tRESOLVED (survey/truth)\tFAILED (survey/truth)")
	for _, g := range got.Resolution {
		for _, t := range want.Resolution {
			if t.Path == g.Path {
				fmt.Fprintf(tw, "%s\t%d\t%d / %d\t%d / %d\n", g.Path, g.Domains, g.Resolved, t.Resolved, g.Failed, t.Failed)
			}
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "\nAddress overlap %s/%s: survey %.1f%%, truth %.1f%%; domains resolving differently: survey %.1f%%, truth %.1f%%\n\n",
		got.Overlap.PathA, got.Overlap.PathB, got.Overlap.OverlapPct, want.Overlap.OverlapPct,
		got.Overlap.DomainsDifferPct, want.Overlap.DomainsDifferPct)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CELL probe/resolve\tTARGETS (survey/truth)\tUNRESPONSIVE % (survey/truth)\tRTT p50 ms (survey/truth)")
	for _, g := range got.Cells {
		for _, t := range want.Cells {
			if t.ProbePath == g.ProbePath && t.ResolvePath == g.ResolvePath {
				fmt.Fprintf(tw, "%s/%s\t%d / %d\t%.1f / %.1f\t%.2f / %.2f\n", g.ProbePath, g.ResolvePath,
					g.Targets, t.Targets, g.UnresponsivePct, t.UnresponsivePct, g.RTTms.P50, t.RTTms.P50)
			}
		}
	}
	tw.Flush()
}
