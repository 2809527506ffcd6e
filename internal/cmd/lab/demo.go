package lab

import (
	"context"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/internal/cmdutil"
)

// DemoOptions for `mptester lab demo`.
type DemoOptions struct {
	IO     *cmdutil.IOStreams
	Logger *slog.Logger
	Where
	Build BuildOptions
}

// NewCmdDemo builds `lab demo`.
func NewCmdDemo(f *cmdutil.Factory, runF func(context.Context, *DemoOptions) error) *cobra.Command {
	opts := &DemoOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Bring up a default lab, measure it, print the report, tear it down",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Logger = f.Logger
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return demoRun(cmd.Context(), opts)
		},
	}
	opts.Where.flags(cmd)
	cmd.Flags().Lookup("name").DefValue = "demo"
	_ = cmd.Flags().Set("name", "demo")
	opts.Build.flags(cmd)
	return cmd
}

func demoRun(ctx context.Context, opts *DemoOptions) error {
	return cmdutil.FlagErrorf("lab demo: not implemented yet")
}
