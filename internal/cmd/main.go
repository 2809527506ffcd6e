// Package cmd runs the CLI and turns its outcome into an exit code.
package cmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/internal/buildinfo"
	"github.com/mptester/mptester/internal/cmd/root"
	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/report"
)

// Main runs mptester with os.Args and returns the exit code.
func Main() int {
	return Run(context.Background(), cmdutil.System(), os.Args[1:])
}

// producerOnce sets the producer every result names once: tests run
// several commands at once in one process.
var producerOnce sync.Once

// Run executes the command line args. SIGINT/SIGTERM cancel the context so
// long runs flush partial results and exit with ExitCancelled.
func Run(ctx context.Context, io *cmdutil.IOStreams, args []string) int {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	producerOnce.Do(func() { report.Producer.Version, report.Producer.Commit = buildinfo.Version, buildinfo.Commit })
	f := &cmdutil.Factory{IO: io, Logger: slog.New(slog.NewTextHandler(io.ErrOut, nil))}
	cmd := root.NewCmdRoot(f)
	// cobra reports unknown commands, bad arguments and flags (groups,
	// required) before a command's RunE starts: all usage errors (exit 2).
	started := false
	markStart(cmd, &started)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	if err != nil && !started && !errors.Is(err, cmdutil.ErrUsage) {
		err = cmdutil.Usage(err)
	}
	if err != nil && !errors.Is(err, cmdutil.ErrSilent) {
		fmt.Fprintf(io.ErrOut, "mptester: %v\n", err)
	}
	return cmdutil.ExitCode(err)
}

func markStart(cmd *cobra.Command, started *bool) {
	if run := cmd.RunE; run != nil {
		cmd.RunE = func(c *cobra.Command, a []string) error {
			*started = true
			return run(c, a)
		}
	}
	for _, c := range cmd.Commands() {
		markStart(c, started)
	}
}
