// Package ctl implements the subcommands that drive a lab from outside:
// down, status, set, scenario, exec, and run (a lab for one command).
package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/internal/cmd/lab/shared"
	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/emu"
)

// DownOptions for `mptester lab down`.
type DownOptions struct {
	IO     *cmdutil.IOStreams
	Logger *slog.Logger
	shared.Where
	Purge bool
}

// NewCmdDown builds `lab down`.
func NewCmdDown(f *cmdutil.Factory, runF func(context.Context, *DownOptions) error) *cobra.Command {
	opts := &DownOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop a lab and remove its namespaces, devices and processes",
		Long: `Stop a lab and remove its namespaces, devices and processes. Its
directory keeps what it measured and how it was built (lab.log, world.json,
truth.json, tranco.csv, a demo's survey.jsonl and run.json); lab down says
where. --purge removes those files too, and the directory if nothing else is
in it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Logger = f.Logger
			return cmdutil.Dispatch(cmd.Context(), opts, runF, downRun)
		},
	}
	opts.Where.Flags(cmd)
	cmd.Flags().BoolVar(&opts.Purge, "purge", false, "also remove the lab's files from its directory")
	return cmd
}

func downRun(ctx context.Context, opts *DownOptions) error {
	if err := opts.Where.Resolve(); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: removing lab namespaces needs root", cmdutil.ErrPermission)
	}
	files := lab.FilesIn(opts.Dir)
	// Ask the daemon to tear down gracefully, then make sure: whatever is
	// left (a dead daemon's namespaces, a hung process) is removed by force.
	pid, running := lab.DaemonPID(opts.Dir)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err := lab.Control(cctx, files.Control, lab.Request{Op: "down"})
	cancel()
	if err == nil {
		if running && !lab.WaitExit(pid, 30*time.Second) {
			opts.Logger.Warn("lab daemon did not exit within 30s; killed", "pid", pid)
		}
	} else {
		opts.Logger.Debug("lab control socket not answering; removing by force", "err", err)
	}
	if err := lab.CleanStale(ctx, opts.Name, opts.Dir); err != nil {
		return err
	}
	if left := lab.Leftovers(opts.Name, opts.Dir); len(left) > 0 {
		return fmt.Errorf("lab %s: could not remove %s", opts.Name, strings.Join(left, ", "))
	}
	if !opts.Purge {
		_, err = fmt.Fprintf(opts.IO.Out, "lab %s is down; its logs and world files stay in %s (lab down --purge removes them)\n", opts.Name, opts.Dir)
		return err
	}
	kept, err := purge(opts.Dir)
	if err != nil {
		return err
	}
	if len(kept) > 0 {
		_, err = fmt.Fprintf(opts.IO.Out, "lab %s is down; its files are removed; %s is kept: it holds %s\n", opts.Name, opts.Dir, strings.Join(kept, ", "))
		return err
	}
	_, err = fmt.Fprintf(opts.IO.Out, "lab %s is down; %s is removed\n", opts.Name, opts.Dir)
	return err
}

// labFiles are the names a lab (and its demo) writes into its directory;
// --purge removes only these, never a directory the user pointed --dir at.
var labFiles = []string{"lab.json", "config.yaml", "tranco.csv", "truth.json", "world.json", "lab.log",
	"control.sock", "pid", "error", "survey.jsonl", "run.json"}

// purge removes the lab's files and then its directory if it is empty.
func purge(dir string) (kept []string, err error) {
	for _, n := range labFiles {
		if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	// A nat64 path's translator and DNS64 state (configs, logs).
	for _, p := range lab.PathNames {
		if err := os.RemoveAll(filepath.Join(dir, "nat64-"+p)); err != nil {
			return nil, err
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			kept = append(kept, e.Name())
		}
	}
	return kept, nil
}

// StatusOptions for `mptester lab status`.
type StatusOptions struct {
	IO *cmdutil.IOStreams
	shared.Where
	JSON bool
}

// NewCmdStatus builds `lab status`.
func NewCmdStatus(f *cmdutil.Factory, runF func(context.Context, *StatusOptions) error) *cobra.Command {
	opts := &StatusOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show a running lab's paths: parameters and packet counters",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Dispatch(cmd.Context(), opts, runF, statusRun)
		},
	}
	opts.Where.Flags(cmd)
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON")
	return cmd
}

func statusRun(ctx context.Context, opts *StatusOptions) error {
	if err := opts.Where.Resolve(); err != nil {
		return err
	}
	resp, err := lab.Control(ctx, lab.FilesIn(opts.Dir).Control, lab.Request{Op: "status"})
	if err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.IO.Out, resp.Status)
	}
	return printStatus(opts.IO.Out, resp.Status)
}

func printStatus(w io.Writer, s *lab.Status) error {
	fmt.Fprintf(w, "lab %s (pid %d, up %s)\n  client ns %s, internet ns %s, dir %s\n",
		s.Info.Name, s.Info.PID, s.Uptime, s.Info.Namespaces.Client, s.Info.Namespaces.Internet, s.Info.Dir)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tSTATE\tDIR\tPARAMS\tIN\tDELIVERED\tDROPPED\tLATENESS p50/p99")
	for _, p := range s.Paths {
		state := "up"
		if p.LinkDown {
			state = "down"
		}
		for _, d := range []emu.Direction{emu.Up, emu.Down} {
			prm, st := p.Up, p.Stats.Up
			if d == emu.Down {
				prm, st = p.Down, p.Stats.Down
			}
			drops := st.DropLoss + st.DropQueue + st.DropBlock + st.DropDown + st.DropInvalid + st.DropMTU
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%v/%v\n", p.Name, state, d, prm,
				st.PacketsIn, st.Delivered, drops, st.Lateness.Median, st.Lateness.P99)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, im := range s.Impairments {
		fmt.Fprintf(w, "  impairment %s %s since %s: %s\n", im.Path, im.Setting, im.Since.Format(time.RFC3339), im.Where)
	}
	return nil
}

// SetOptions for `mptester lab set`.
type SetOptions struct {
	IO *cmdutil.IOStreams
	shared.Where
	Path string
	Args []string
}

// NewCmdSet builds `lab set`.
func NewCmdSet(f *cmdutil.Factory, runF func(context.Context, *SetOptions) error) *cobra.Command {
	opts := &SetOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "set <wlan0|wwan0> <setting>...",
		Short: "Change a path of a running lab: delay, jitter, loss, rate, down/up",
		Long: `Change one path of a running lab at once. Settings apply to both
directions unless prefixed with up. or down. (client->Internet and back):
  delay=200ms jitter=5ms loss=30% ge=P,R,LOSSGOOD,LOSSBAD rate=10mbit queue=64kb
  up.rate=2mbit down.delay=50ms
  ecn=bleach | ecn=ce/N | ecn=off   clear the ECN field, or mark every Nth
          ECN-capable packet CE (lab status counts both per direction)
  down | up   (the whole path)
Impairments of the access network (nftables in the Internet namespace, on
the path's router side; they compose; lab status --json records each with
where and since when):
  block=udp/443[,tcp/80...] | block=off   drop client->Internet packets to these ports
  block=udp/443@198.19.0.0/24[,...]   only towards that destination prefix
  strip=mptcp | strip=mptcp-syn | strip=off   a middlebox removing MPTCP options
  v6=blackhole | v6=ok   IPv6 addresses and routes stay, nothing is delivered
  pmtu=1280,icmp=drop | pmtu=off   a path-MTU black hole (the emulator drops
                                   larger packets both ways, no ICMP)
  quic-interfere=443 | quic-interfere=off   each UDP flow to the port is
          dropped after its first 3 packets (a middlebox expecting DTLS)
  portal | portal=off   a captive portal: the path's DNS answers the portal
          for every name, HTTP answers 302 to its login page, HTTPS fails
          verification, nothing else but DNS passes
  nat64   (lab up --wwan0 nat64 only) the path is IPv6-only behind a stateful
          NAT64 (tayga, prefix fd00:64::/96 on wwan0) whose resolver is a
          DNS64 (unbound); nat64=no-rfc7050: a DNS64 that answers
          ipv4only.arpa NXDOMAIN (RFC 7050 discovery finds no prefix)
  cgnat   (lab up only) the path's IPv4 address is 100.64.N.2 (RFC 6598)
          behind a stateful NAT (nftables): servers see the NAT's address,
          nothing connects in; 100.64.254.N is a server in the cellular
          core that only this path reaches; with nat64 ("nat64 cgnat") the
          translator's IPv4 side is 100.64.N.2 behind that NAT and the core
          server is reached through the NAT64`,
		Example: `  mptester lab set wlan0 delay=200ms loss=30%
  mptester lab set wlan0 down
  mptester lab set wlan0 block=udp/443 strip=mptcp`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Path, opts.Args = args[0], args[1:]
			return cmdutil.Dispatch(cmd.Context(), opts, runF, setRun)
		},
	}
	opts.Where.Flags(cmd)
	return cmd
}

func setRun(ctx context.Context, opts *SetOptions) error {
	if err := opts.Where.Resolve(); err != nil {
		return err
	}
	if _, ok := lab.Plan(opts.Path); !ok {
		return cmdutil.FlagErrorf("unknown path %q (want wlan0 or wwan0)", opts.Path)
	}
	if _, _, err := lab.ParseSettings(opts.Args); err != nil {
		return cmdutil.FlagErrorf("%v", err)
	}
	resp, err := lab.Control(ctx, lab.FilesIn(opts.Dir).Control,
		lab.Request{Op: "set", Path: opts.Path, Args: opts.Args})
	if err != nil {
		return shared.MapErr(err)
	}
	for _, p := range resp.Status.Paths {
		if p.Name == opts.Path {
			state := "up"
			if p.LinkDown {
				state = "down"
			}
			fmt.Fprintf(opts.IO.Out, "%s %s: up %s; down %s\n", p.Name, state, p.Up, p.Down)
		}
	}
	return nil
}

// ExecOptions for `mptester lab exec`.
type ExecOptions struct {
	IO *cmdutil.IOStreams
	shared.Where
	Side    string
	Command []string
}

// NewCmdExec builds `lab exec`.
func NewCmdExec(f *cmdutil.Factory, runF func(context.Context, *ExecOptions) error) *cobra.Command {
	opts := &ExecOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "exec [--side client|server] -- <command> [args...]",
		Short: "Run a command inside a lab namespace, with the lab's mptester config",
		Long: `Run a command in the lab's client namespace (default) or Internet
namespace (--side server). The environment carries MPTESTER_CONFIG, the
lab's config file (per-path DNS servers, as a user's config would say),
and MPTESTER_LAB_DIR. The command's exit status is passed through.`,
		Example: `  mptester lab exec -- mptester ifaces
  mptester lab exec -- ping -c 3 -I wwan0 198.19.0.1
  mptester lab exec --side server -- ss -tln`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Command = args
			return cmdutil.Dispatch(cmd.Context(), opts, runF, execRun)
		},
	}
	opts.Where.Flags(cmd)
	cmd.Flags().StringVar(&opts.Side, "side", "client", "namespace: client or server (the Internet side)")
	return cmd
}

func execRun(ctx context.Context, opts *ExecOptions) error {
	if err := opts.Where.Resolve(); err != nil {
		return err
	}
	if err := checkSide(opts.Side); err != nil {
		return err
	}
	info, err := lab.ReadInfo(opts.Dir)
	if err != nil {
		return err
	}
	return execIn(ctx, opts.IO, info, opts.Side, opts.Command)
}

// execIn runs argv in a lab namespace and passes its exit status through.
func execIn(ctx context.Context, io *cmdutil.IOStreams, info lab.Info, side string, argv []string) error {
	cmd, err := lab.Command(ctx, info, side, argv...)
	if err != nil {
		return cmdutil.FlagErrorf("%v", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = io.In, io.Out, io.ErrOut
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return &cmdutil.ExitStatusError{Code: ee.ExitCode()}
	case ctx.Err() != nil:
		return fmt.Errorf("%w: %w", cmdutil.ErrCancelled, ctx.Err())
	}
	return err
}

// RunOptions for `mptester lab run`.
type RunOptions struct {
	IO     *cmdutil.IOStreams
	Logger *slog.Logger
	shared.Where
	Build   shared.BuildOptions
	Side    string
	Command []string
	NoServe bool
}

// NewCmdRun builds `lab run`.
func NewCmdRun(f *cmdutil.Factory, runF func(context.Context, *RunOptions) error) *cobra.Command {
	opts := &RunOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "run [flags] -- <command> [args...]",
		Short: "Bring a lab up, run a command in it, tear it down; exits with the command's status",
		Long: `Bring a lab up in this process, run the command in its client namespace
(as 'lab exec' does; 'lab set --name NAME' works meanwhile), then tear the
lab down and exit with the command's exit status. For tests and scripts.`,
		Example: `  mptester lab run --name t1 --wlan0 'delay=25ms' -- ping -c 5 -I wlan0 198.19.0.1`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Command = args
			opts.Logger = f.Logger
			return cmdutil.Dispatch(cmd.Context(), opts, runF, runRun)
		},
	}
	opts.Where.Flags(cmd)
	opts.Build.Flags(cmd)
	cmd.Flags().StringVar(&opts.Side, "side", "client", "namespace: client or server (the Internet side)")
	shared.NoServeFlag(cmd, &opts.NoServe)
	return cmd
}

func runRun(ctx context.Context, opts *RunOptions) error {
	if err := opts.Where.Resolve(); err != nil {
		return err
	}
	if err := checkSide(opts.Side); err != nil {
		return err
	}
	lo, err := opts.Build.LabOptions(opts.Where)
	if err != nil {
		return err
	}
	lo.Logger = opts.Logger
	l, err := lab.Up(ctx, lo)
	if err != nil {
		return shared.MapErr(err)
	}
	defer l.Close()
	if !opts.NoServe {
		stopServe, err := shared.StartTestServer(ctx, l, opts.Logger)
		if err != nil {
			return err
		}
		defer stopServe()
	}
	ln, err := lab.ListenControl(l.Info().Files.Control)
	if err != nil {
		return err
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = lab.ServeControlOn(sctx, ln, l, nil) }()
	runErr := execIn(ctx, opts.IO, l.Info(), opts.Side, opts.Command)
	stop()
	if err := l.Close(); err != nil {
		return errors.Join(runErr, err)
	}
	return runErr
}

// checkSide validates --side before a lab is built or entered.
func checkSide(side string) error {
	if side != "client" && side != "server" {
		return cmdutil.FlagErrorf("--side: %q (want client or server)", side)
	}
	return nil
}

// ScenarioOptions for `mptester lab scenario`.
type ScenarioOptions struct {
	IO *cmdutil.IOStreams
	shared.Where
	Name string
}

// NewCmdScenario builds `lab scenario`.
func NewCmdScenario(f *cmdutil.Factory, runF func(context.Context, *ScenarioOptions) error) *cobra.Command {
	opts := &ScenarioOptions{IO: f.IO}
	var long strings.Builder
	for _, s := range lab.Scenarios() {
		fmt.Fprintf(&long, "  %-16s %s (cause planted: %s)\n", s.Name, s.Help, s.Cause)
	}
	cmd := &cobra.Command{
		Use:   "scenario <name>",
		Short: "Start a named handover scenario on a running lab now",
		Long: `Start a named timeline on a running lab now; its Wi-Fi change comes ` + lab.ScenarioStart.String() + `
later. When each step really took effect is the ground truth, in
'lab status --json' under "timeline". The scenarios:

` + long.String(),
		Example: `  mptester lab scenario wifi-blackhole & mptester lab exec -- mptester run --mode mobile --server 198.18.200.1 --insecure --paths wlan0,wwan0 --backup wwan0`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			return cmdutil.Dispatch(cmd.Context(), opts, runF, scenarioRun)
		},
	}
	opts.Where.Flags(cmd)
	return cmd
}

func scenarioRun(ctx context.Context, opts *ScenarioOptions) error {
	if err := opts.Where.Resolve(); err != nil {
		return err
	}
	if _, _, err := lab.GetScenario(opts.Name); err != nil {
		return cmdutil.FlagErrorf("%v", err)
	}
	resp, err := lab.Control(ctx, lab.FilesIn(opts.Dir).Control, lab.Request{Op: "scenario", Args: []string{opts.Name}})
	if err != nil {
		return shared.MapErr(err)
	}
	fmt.Fprintf(opts.IO.Out, "scenario %s started at %s\n", opts.Name, resp.Status.Timeline.Started.UTC().Format(time.RFC3339Nano))
	return nil
}
