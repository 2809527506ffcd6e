// Package doctor implements `mptester doctor`.
package doctor

import (
	"github.com/spf13/cobra"

	"github.com/mptester/mptester/internal/cmdutil"
)

// Options for `mptester doctor`.
type Options struct {
	IO *cmdutil.IOStreams
}

// NewCmdDoctor builds the command; runF replaces the run function in tests.
func NewCmdDoctor(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO}
	return &cobra.Command{
		Use: "doctor",
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return nil
		},
	}
}
