// Package run implements `mptester run`.
package run

import (
	"github.com/spf13/cobra"

	"github.com/mptester/mptester/internal/cmdutil"
)

// Options for `mptester run`.
type Options struct {
	IO *cmdutil.IOStreams
}

// NewCmdRun builds the command; runF replaces the run function in tests.
func NewCmdRun(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO}
	return &cobra.Command{
		Use:    "run",
		Short:  "(not yet implemented)",
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return cmdutil.FlagErrorf("run is not implemented yet")
		},
	}
}
