// Package demo implements `mptester lab demo`: a lab, a survey and a run
// in it, each compared with the ground truth the lab planted.
package demo

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
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/internal/cmd/lab/shared"
	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/emu"
	"github.com/mptester/mptester/lab/world"
	"github.com/mptester/mptester/patterns"
	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/survey"
)

// DemoOptions for `mptester lab demo`.
type DemoOptions struct {
	IO     *cmdutil.IOStreams
	Logger *slog.Logger
	shared.Where
	Build shared.BuildOptions
	// Exe is the mptester binary run inside the lab (default: this one).
	Exe string
}

// NewCmdDemo builds `lab demo`.
func NewCmdDemo(f *cmdutil.Factory, runF func(context.Context, *DemoOptions) error) *cobra.Command {
	opts := &DemoOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Bring up a default lab and show the point in under a minute: survey vs truth, aggregation, a handover, a report",
		Long: `Bring up a lab with a generated world and, against its ground truth and
its own test server:
  1. run 'mptester survey' from its client (both paths, the lab's per-path
     DNS) and print the summary beside the world's truth (truth.json);
  2. shape the paths like Wi-Fi (40 Mbit/s) and cellular (20 Mbit/s) and
     run bulk over TCP on each path and over MPTCP, mpquic and MPHTTP, each
     with its aggregation ratio against the best single path;
  3. make the cellular MPTCP endpoint a backup, black Wi-Fi out (scenario
     ` + demoScenario + `) during a mobile-mode run and print each handover
     transport's maximum delay and measured cause beside the planted one;
  4. tear the lab down and write report.html (the report of all three).
The survey output, the run documents and the report stay in the lab
directory.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Logger = f.Logger
			return cmdutil.Dispatch(cmd.Context(), opts, runF, demoRun)
		},
	}
	opts.Where.Flags(cmd)
	opts.Build.Flags(cmd)
	_ = cmd.Flags().Set("name", "demo")
	cmd.Flags().Lookup("name").DefValue = "demo"
	_ = cmd.Flags().Set("domains", "100")
	cmd.Flags().Lookup("domains").DefValue = "100"
	return cmd
}

func demoRun(ctx context.Context, opts *DemoOptions) error {
	t0 := time.Now()
	if err := opts.Where.Resolve(); err != nil {
		return err
	}
	lo, err := opts.Build.LabOptions(opts.Where)
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
		return shared.MapErr(err)
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

	log := slog.New(slog.DiscardHandler)
	if opts.Logger != nil { // the test server's start-up lines would bury the demo's
		log = slog.New(warnOnly{opts.Logger.Handler()})
	}
	docs, patErr := demoPatterns(ctx, out, l, exe, log)
	if patErr != nil {
		fmt.Fprintf(out, "pattern run: %v\n", patErr)
	}
	if err := l.Close(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nLab %q torn down; whole demo took %v.\n", info.Name, time.Since(t0).Round(time.Millisecond))
	page := filepath.Join(info.Dir, "report.html")
	rep := exec.CommandContext(ctx, exe, append([]string{"report", "--format", "html", "-o", page, jsonl}, docs...)...)
	rep.Env = os.Environ()
	if b, err := rep.CombinedOutput(); err != nil {
		return fmt.Errorf("report: %v: %s", err, tail(b, 1000))
	}
	fmt.Fprintf(out, "Report (survey, aggregation, handover, access network): %s\n", page)
	if patErr != nil {
		return fmt.Errorf("%w: the pattern run failed: %w", cmdutil.ErrPartial, patErr)
	}
	return nil
}

// demoSize is each bulk transfer of the demo: long enough (several
// seconds on the cellular path alone) for the multipath transports'
// aggregation to show over their slow start.
const demoSize = 10_000_000

// demoScenario is the demo's handover: Wi-Fi loses everything while the
// interactive streams run (RTO with data to send: 000 Table I's under-rto).
const demoScenario = "wifi-blackhole"

// demoPatterns shows what multipath brings, against the lab's own test
// server: on paths shaped like Wi-Fi (40 Mbit/s) and cellular (20 Mbit/s),
// bulk over TCP on each path and over MPTCP, mpquic and MPHTTP with each
// one's aggregation ratio against the best single path; then one handover
// in mobile mode with each transport's maximum delay and cause beside the
// planted one. It returns the run documents it wrote.
func demoPatterns(ctx context.Context, out io.Writer, l *lab.Lab, exe string, log *slog.Logger) ([]string, error) {
	info := l.Info()
	stopServe, err := shared.StartTestServer(ctx, l, log)
	if err != nil {
		return nil, err
	}
	defer stopServe()
	fp := l.Info().TestServer.Fingerprint
	for path, settings := range map[string][]string{"wlan0": {"rate=40mbit"}, "wwan0": {"rate=20mbit"}} {
		c, err := emu.ParseChange(settings)
		if err != nil {
			return nil, err
		}
		if err := l.Set(path, c); err != nil {
			return nil, err
		}
	}
	var docs []string
	agg := filepath.Join(info.Dir, "aggregation.json")
	fmt.Fprintf(out, "\nAggregation: paths rate-limited like Wi-Fi (wlan0, 40 Mbit/s) and cellular (wwan0, 20 Mbit/s); the lab's test server on %s\n", lab.Server4)
	fmt.Fprintf(out, "$ mptester lab exec -- mptester run --server %s --pin %s... --paths wlan0,wwan0 --patterns bulk --transports tcp,mptcp,mpquic,mphttp --size %d\n",
		lab.Server4, fp[:8], demoSize)
	if err := demoRunCmd(ctx, info, exe, "run", "--server", lab.Server4.String(), "--pin", fp,
		"--paths", "wlan0,wwan0", "--patterns", "bulk", "--transports", "tcp,mptcp,mpquic,mphttp",
		"--size", strconv.Itoa(demoSize), "--pace", "100ms", "--seed", "1", "--log-level", "warn", "-o", agg); err != nil {
		return docs, err
	}
	docs = append(docs, agg)
	d, err := readRunDoc(agg)
	if err != nil {
		return docs, err
	}
	printAggregation(out, d)

	// Mobile mode: the cellular MPTCP endpoint becomes a backup, as on a
	// phone, then the scenario blacks Wi-Fi out while the streams run.
	if err := demoBackupEndpoints(ctx, info); err != nil {
		return docs, err
	}
	sc, _, err := lab.GetScenario(demoScenario)
	if err != nil {
		return docs, err
	}
	mob := filepath.Join(info.Dir, "mobile.json")
	fmt.Fprintf(out, "\nHandover: scenario %s (%s; planted cause %s)\n", sc.Name, sc.Help, sc.Cause)
	fmt.Fprintf(out, "$ mptester lab scenario %s & mptester lab exec -- mptester run --mode mobile --server %s --paths wlan0,wwan0 --backup wwan0 --duration 9s\n", sc.Name, lab.Server4)
	if err := l.StartScenario(demoScenario); err != nil {
		return docs, err
	}
	if err := demoRunCmd(ctx, info, exe, "run", "--mode", "mobile", "--server", lab.Server4.String(), "--pin", fp,
		"--paths", "wlan0,wwan0", "--backup", "wwan0", "--duration", "9s", "--grace", "2s", "--log-level", "warn", "-o", mob); err != nil {
		return docs, err
	}
	docs = append(docs, mob)
	md, err := readRunDoc(mob)
	if err != nil {
		return docs, err
	}
	printHandover(out, md, sc.Cause)

	acc, err := demoAccess(ctx, out, l, exe, fp)
	if acc != "" {
		docs = append(docs, acc)
	}
	return docs, err
}

// demoAccess shows one access network's impairment named by what run
// measured: UDP 443 blocked on Wi-Fi (000 §III's middlebox), QUIC tried
// on both paths, the cause beside the planted truth.
func demoAccess(ctx context.Context, out io.Writer, l *lab.Lab, exe, fp string) (string, error) {
	info := l.Info()
	fmt.Fprintf(out, "\nAccess network: a middlebox on Wi-Fi drops UDP to port 443 (lab set wlan0 block=udp/443)\n")
	if _, err := exec.LookPath("nft"); err != nil {
		fmt.Fprintf(out, "skipped: the lab plants it with nftables (nft), not installed\n")
		return "", nil
	}
	// The handover scenario left Wi-Fi black-holed.
	c, _, err := lab.ParseSettings([]string{"loss=0%"})
	if err != nil {
		return "", err
	}
	if err := l.Set("wlan0", c); err != nil {
		return "", err
	}
	yes := []lab.PortRule{{Proto: "udp", Port: 443}}
	if err := l.Impair("wlan0", lab.ImpairChange{Block: &yes}); err != nil {
		return "", err
	}
	acc := filepath.Join(info.Dir, "access.json")
	fmt.Fprintf(out, "$ mptester lab exec -- mptester run --server %s --pin %s... --paths wlan0,wwan0 --patterns ping --transports quic --connect-timeout 2s\n", lab.ServerName, fp[:8])
	if err := demoRunCmd(ctx, info, exe, "run", "--server", lab.ServerName, "--server-name", lab.Server4.String(), "--pin", fp,
		"--paths", "wlan0,wwan0", "--patterns", "ping", "--transports", "quic", "--connect-timeout", "2s", "--pace", "0s",
		"--log-level", "warn", "-o", acc); err != nil {
		return "", err
	}
	d, err := readRunDoc(acc)
	if err != nil {
		return acc, err
	}
	planted := map[string]string{}
	for _, im := range l.Status().Impairments {
		planted[im.Path] = im.Setting
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TRANSPORT\tPATH\tSTATUS\tCAUSE (measured / planted)")
	for _, r := range d.Records {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s / %s\n", r.Config.Transport, r.Config.Path, r.Status, cmp.Or(r.Cause, "-"), cmp.Or(planted[r.Config.Path], "-"))
	}
	return acc, tw.Flush()
}

// demoRunCmd runs `mptester ARGS...` in the client namespace; exit 3
// (partial) still leaves a document to show.
func demoRunCmd(ctx context.Context, info lab.Info, exe string, args ...string) error {
	cmd, err := lab.Command(ctx, info, "client", append([]string{exe}, args...)...)
	if err != nil {
		return err
	}
	var rerr bytes.Buffer
	cmd.Stderr = &rerr
	err = cmd.Run()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == cmdutil.ExitPartial) {
		return fmt.Errorf("mptester %s: %v: %s", args[0], err, tail(rerr.Bytes(), 1000))
	}
	return nil
}

// demoBackupEndpoints marks the client's cellular MPTCP endpoints backup.
func demoBackupEndpoints(ctx context.Context, info lab.Info) error {
	w, _ := lab.Plan("wwan0")
	for _, args := range [][]string{{"mptcp", "endpoint", "flush"},
		{"mptcp", "endpoint", "add", w.Client4.String(), "dev", "wwan0", "subflow", "backup"},
		{"mptcp", "endpoint", "add", w.Client6.String(), "dev", "wwan0", "subflow", "backup"}} {
		cmd, err := lab.Command(ctx, info, "client", append([]string{"ip"}, args...)...)
		if err != nil {
			return err
		}
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, b)
		}
	}
	return nil
}

func readRunDoc(path string) (*runDoc, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d runDoc
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &d, nil
}

// singlePath are the transports the aggregation ratio is measured against.
var singlePath = []string{"tcp", "quic"}

// printAggregation prints each bulk test with the bytes each path received
// and, for a multipath transport, its goodput over the best single path's
// (study 003's aggregation rate).
func printAggregation(out io.Writer, d *runDoc) {
	best, bestWhat := 0.0, ""
	for _, r := range d.Records {
		if slices.Contains(singlePath, r.Config.Transport) && r.Status == "success" && r.Result.GoodputBPS > best {
			best, bestWhat = r.Result.GoodputBPS, r.Config.Transport+" on "+r.Config.Path
		}
	}
	slices.SortStableFunc(d.Records, func(a, b runRecord) int {
		multi := func(r runRecord) int {
			if slices.Contains(singlePath, r.Config.Transport) {
				return 0
			}
			return 1
		}
		return cmp.Or(cmp.Compare(multi(a), multi(b)),
			cmp.Compare(a.Config.Transport, b.Config.Transport), cmp.Compare(a.Config.Path, b.Config.Path))
	})
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TRANSPORT\tPATH\tSTATUS\tGOODPUT\tRECEIVED wlan0 / wwan0\tAGGREGATION (vs best single path)")
	for _, r := range d.Records {
		res, ratio := r.Error, "-"
		if r.Result.GoodputBPS > 0 {
			res = fmt.Sprintf("%.1f Mbit/s", r.Result.GoodputBPS/1e6)
			if !slices.Contains(singlePath, r.Config.Transport) && best > 0 {
				ratio = fmt.Sprintf("%.2fx", r.Result.GoodputBPS/best)
			}
		}
		rx := map[string]int64{}
		for _, pb := range r.PathBytes {
			rx[pb.Path] = pb.BytesReceived
		}
		path := r.Config.Path
		if !slices.Contains(singlePath, r.Config.Transport) {
			path = "both"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s / %s\t%s\n", r.Config.Transport, path, r.Status, res,
			humanBytes(rx["wlan0"]), humanBytes(rx["wwan0"]), ratio)
	}
	tw.Flush()
	if best > 0 {
		fmt.Fprintf(out, "best single path: %s, %.1f Mbit/s; above 1x a multipath transport beat it\n", bestWhat, best/1e6)
	}
}

// printHandover prints each transport's handover beside the planted cause.
func printHandover(out io.Writer, d *runDoc, planted string) {
	for _, m := range d.Mobile {
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TRANSPORT\tSTATUS\tHANDOVER\tCAUSE (measured / planted)\tMAX DELAY up / down")
		for _, t := range m.Transports {
			cause := cmp.Or(string(t.Handover.Cause), "-")
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s / %s\t%s / %s\n", t.Transport, t.Status, t.Handover.Status, cause, planted,
				t.Upload.Max.Round(time.Millisecond), t.Download.Max.Round(time.Millisecond))
		}
		tw.Flush()
	}
}

// runDoc is the part of `mptester run`'s JSON document the demo prints.
type runDoc struct {
	Status  string      `json:"status"`
	Records []runRecord `json:"records"`
	// Mobile holds the mobile_summary records (decoded from Records' raw).
	Mobile []patterns.MobileRecord `json:"-"`
}

func (d *runDoc) UnmarshalJSON(b []byte) error {
	var raw struct {
		Status  string            `json:"status"`
		Records []json.RawMessage `json:"records"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	d.Status = raw.Status
	for _, r := range raw.Records {
		var typ struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(r, &typ); err != nil {
			return err
		}
		switch typ.Type {
		case "pattern_test":
			var rec runRecord
			if err := json.Unmarshal(r, &rec); err != nil {
				return err
			}
			d.Records = append(d.Records, rec)
		case patterns.MobileRecordType:
			var m patterns.MobileRecord
			if err := json.Unmarshal(r, &m); err != nil {
				return err
			}
			d.Mobile = append(d.Mobile, m)
		}
	}
	return nil
}

type runRecord struct {
	Config struct {
		Pattern   string `json:"pattern"`
		Transport string `json:"transport"`
		Path      string `json:"path"`
	} `json:"config"`
	Status string `json:"status"`
	Error  string `json:"error"`
	Cause  string `json:"cause"`
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
		pr, err := survey.NewEngine(ctx, "icmp", p, survey.EngineOptions{})
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

// warnOnly passes on warnings and errors only.
type warnOnly struct{ slog.Handler }

func (w warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.Handler.Enabled(ctx, l)
}
