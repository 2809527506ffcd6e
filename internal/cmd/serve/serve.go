// Package serve implements `mptester serve`.
package serve

import (
	"github.com/spf13/cobra"

	"github.com/mptester/mptester/internal/cmdutil"
)

// Options for `mptester serve`.
type Options struct {
	IO *cmdutil.IOStreams
}

// NewCmdServe builds the command; runF replaces the run function in tests.
func NewCmdServe(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO}
	return &cobra.Command{
		Use:    "serve",
		Short:  "(not yet implemented)",
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return cmdutil.FlagErrorf("serve is not implemented yet")
		},
	}
}
