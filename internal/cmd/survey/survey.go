// Package survey implements `mptester survey`.
package survey

import (
	"github.com/spf13/cobra"

	"github.com/mptester/mptester/internal/cmdutil"
)

// Options for `mptester survey`.
type Options struct {
	IO *cmdutil.IOStreams
}

// NewCmdSurvey builds the command; runF replaces the run function in tests.
func NewCmdSurvey(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO}
	return &cobra.Command{
		Use:    "survey",
		Short:  "(not yet implemented)",
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return cmdutil.FlagErrorf("survey is not implemented yet")
		},
	}
}
