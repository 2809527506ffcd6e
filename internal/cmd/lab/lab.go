// Package lab implements `mptester lab ...`.
package lab

import (
	"github.com/spf13/cobra"

	"github.com/mptester/mptester/internal/cmdutil"
)

// NewCmdLab builds the `lab` command group.
func NewCmdLab(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:    "lab",
		Short:  "(not yet implemented)",
		Hidden: true,
	}
}
