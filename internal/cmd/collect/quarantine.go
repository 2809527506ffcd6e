package collect

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/internal/cmdutil"
)

// QuarantineOptions of `mptester collect run quarantine`.
type QuarantineOptions struct {
	IO      *cmdutil.IOStreams
	Collect *Options // the stores
	RunID   string
	Reason  string
}

func newCmdRun(f *cmdutil.Factory, opts *Options) *cobra.Command {
	cmd := &cobra.Command{Use: "run", Short: "Manage stored runs"}
	cmd.AddCommand(NewCmdRunQuarantine(f, opts, nil))
	return cmd
}

// NewCmdRunQuarantine builds `collect run quarantine`; runF replaces
// runQuarantineRun in tests.
func NewCmdRunQuarantine(f *cmdutil.Factory, co *Options, runF func(context.Context, *QuarantineOptions) error) *cobra.Command {
	opts := &QuarantineOptions{IO: f.IO, Collect: co}
	cmd := storeCmd(f, co, &cobra.Command{Use: "quarantine RUN_ID",
		Short: "Hide a stored run from every view, report and export, and roll its probe's other runs of that day up again without it; its raw upload and index row are kept"},
		opts, runF, runQuarantineRun, &opts.RunID)
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why, kept with the run")
	return cmd
}

func runQuarantineRun(ctx context.Context, opts *QuarantineOptions) error {
	return withServer(ctx, opts.Collect, func(srv *collect.Server) error {
		if err := srv.Quarantine(ctx, opts.RunID, opts.Reason); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return cmdutil.FlagErrorf("%v", err)
			}
			return err
		}
		fmt.Fprintf(opts.IO.Out, "quarantined %s\n", opts.RunID)
		return nil
	})
}
