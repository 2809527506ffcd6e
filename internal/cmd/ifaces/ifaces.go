// Package ifaces implements `mptester ifaces`.
package ifaces

import (
	"github.com/spf13/cobra"

	"github.com/mptester/mptester/internal/cmdutil"
)

// Options for `mptester ifaces`.
type Options struct {
	IO *cmdutil.IOStreams
}

// NewCmdIfaces builds the command; runF replaces the run function in tests.
func NewCmdIfaces(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO}
	return &cobra.Command{
		Use: "ifaces",
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return nil
		},
	}
}
