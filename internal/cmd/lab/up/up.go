// Package up implements `mptester lab up` and `lab daemon`: up starts the
// daemon (detached) that builds the lab, holds it and serves its control
// socket until `lab down`.
package up

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/internal/cmd/lab/shared"
	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/lab"
)

// UpOptions for `mptester lab up`.
type UpOptions struct {
	IO     *cmdutil.IOStreams
	Logger *slog.Logger
	shared.Where
	Build shared.BuildOptions
	// Exe is the binary started as the lab daemon (default: this one).
	Exe     string
	Timeout time.Duration
	NoServe bool
}

// NewCmdUp builds `lab up`; runF replaces upRun in tests.
func NewCmdUp(f *cmdutil.Factory, runF func(context.Context, *UpOptions) error) *cobra.Command {
	opts := &UpOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a lab in the background and print lab.json",
		Long: `Start a lab: a background process (the lab daemon, logging to DIR/lab.log)
builds the namespaces and emulated paths and serves the synthetic Internet
until 'lab down'. If a lab of that name is running (its control socket
answers), up refuses: run 'lab down' first. What a crashed lab of that name
left behind (namespaces, devices, its process) is removed first.

The lab's servers (198.18.200.1, fd00:200::1) run the mptester test server,
as 'mptester serve' does, on the ports 'mptester run' uses by default:
TLS/TCP 443 (MPTCP-capable), QUIC 443 and 6121, with a self-signed
certificate (--no-serve: none). Prints lab.json: namespaces, interfaces,
addresses, resolvers, servers, the test server's fingerprint and a run
command (test_server), and file paths.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Logger = f.Logger
			return cmdutil.Dispatch(cmd.Context(), opts, runF, upRun)
		},
	}
	opts.Where.Flags(cmd)
	opts.Build.Flags(cmd)
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", time.Minute, "give up if the lab is not up within this `duration`")
	shared.NoServeFlag(cmd, &opts.NoServe)
	return cmd
}

func upRun(ctx context.Context, opts *UpOptions) error {
	if err := opts.Where.Resolve(); err != nil {
		return err
	}
	if opts.Timeout <= 0 {
		return cmdutil.FlagErrorf("--timeout: must be positive (got %v)", opts.Timeout)
	}
	if _, err := opts.Build.LabOptions(opts.Where); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: the lab needs root to create network namespaces", cmdutil.ErrPermission)
	}
	files := lab.FilesIn(opts.Dir)
	// A lab that answers is not stale: do not kill it behind the user's back.
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	_, err := lab.Control(cctx, files.Control, lab.Request{Op: "status"})
	cancel()
	if err == nil {
		return fmt.Errorf("lab %s is already running (dir %s); run 'mptester lab down --name %s' first", opts.Name, opts.Dir, opts.Name)
	}
	if err := lab.CleanStale(ctx, opts.Name, opts.Dir); err != nil {
		return fmt.Errorf("clean stale lab %s: %w", opts.Name, err)
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return err
	}
	errFile := filepath.Join(opts.Dir, "error")
	_ = os.Remove(errFile)
	logf, err := os.OpenFile(files.Log, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	exe := opts.Exe
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return err
		}
	}
	args := append([]string{"lab", "daemon", "--name", opts.Name, "--dir", opts.Dir}, opts.Build.Args()...)
	if opts.NoServe {
		args = append(args, "--no-serve")
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = "/"
	detach(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start lab daemon: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	opts.Logger.Debug("lab daemon started", "pid", cmd.Process.Pid, "log", files.Log)

	deadline := time.NewTimer(opts.Timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGTERM)
			return fmt.Errorf("%w: lab up interrupted", cmdutil.ErrCancelled)
		case <-deadline.C:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			return fmt.Errorf("lab %s not up within %v; see %s", opts.Name, opts.Timeout, files.Log)
		case err := <-exited:
			return fmt.Errorf("lab daemon exited (%v): %s", err, daemonError(errFile, files.Log))
		case <-tick.C:
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := lab.Control(cctx, files.Control, lab.Request{Op: "status"})
		cancel()
		if err != nil || resp.Status == nil {
			continue
		}
		return cmdutil.WriteJSON(opts.IO.Out, resp.Status.Info)
	}
}

// daemonError is the daemon's own account of its failure, else the end of
// its log.
func daemonError(errFile, logFile string) string {
	if b, err := os.ReadFile(errFile); err == nil && len(b) > 0 {
		return string(bytes.TrimSpace(b))
	}
	b, _ := os.ReadFile(logFile)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return "log: " + string(bytes.TrimSpace(b))
}

// DaemonOptions for the hidden `mptester lab daemon`.
type DaemonOptions struct {
	Logger *slog.Logger
	shared.Where
	Build   shared.BuildOptions
	NoServe bool
}

// NewCmdDaemon builds the hidden command `lab up` starts in the background.
func NewCmdDaemon(f *cmdutil.Factory, runF func(context.Context, *DaemonOptions) error) *cobra.Command {
	opts := &DaemonOptions{}
	cmd := &cobra.Command{
		Use:    "daemon",
		Short:  "Run a lab in the foreground until 'lab down' or SIGTERM (started by 'lab up')",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Logger = f.Logger
			return cmdutil.Dispatch(cmd.Context(), opts, runF, daemonRun)
		},
	}
	opts.Where.Flags(cmd)
	opts.Build.Flags(cmd)
	shared.NoServeFlag(cmd, &opts.NoServe)
	return cmd
}

func daemonRun(ctx context.Context, opts *DaemonOptions) error {
	if err := opts.Where.Resolve(); err != nil {
		return err
	}
	errFile := filepath.Join(opts.Dir, "error")
	fail := func(err error) error {
		_ = os.WriteFile(errFile, []byte(err.Error()+"\n"), 0o644)
		return shared.MapErr(err)
	}
	lo, err := opts.Build.LabOptions(opts.Where)
	if err != nil {
		return fail(err)
	}
	lo.Logger = opts.Logger
	l, err := lab.Up(ctx, lo)
	if err != nil {
		return fail(err)
	}
	defer l.Close()
	if !opts.NoServe {
		stopServe, err := shared.StartTestServer(ctx, l, opts.Logger)
		if err != nil {
			return fail(err)
		}
		defer stopServe()
	}
	files := l.Info().Files
	if err := os.WriteFile(files.PID, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return fail(err)
	}
	// Runs until SIGTERM/SIGINT (ctx) or a "down" request.
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	err = lab.ServeControl(sctx, files.Control, l, stop)
	if err != nil {
		return fail(err)
	}
	opts.Logger.Info("lab daemon stopping", "name", opts.Name)
	if err := l.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
