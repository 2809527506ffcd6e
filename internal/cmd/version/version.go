// Package version implements `mptester version`.
package version

import (
	"context"
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/internal/buildinfo"
	"github.com/mptester/mptester/internal/cmdutil"
)

// Options for `mptester version`.
type Options struct {
	IO   *cmdutil.IOStreams
	JSON bool
}

// Info is what `version --json` prints.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	BuildDate string `json:"build_date"`
	GoVersion string `json:"go_version"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
}

// NewCmdVersion builds the command; runF replaces versionRun in tests.
func NewCmdVersion(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print version, commit, build date, Go version and OS/arch",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Dispatch(cmd.Context(), opts, runF, versionRun)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON")
	return cmd
}

func current() Info {
	return Info{Version: buildinfo.Version, Commit: buildinfo.Commit, BuildDate: buildinfo.Date,
		GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
}

func versionRun(_ context.Context, opts *Options) error {
	i := current()
	if opts.JSON {
		return cmdutil.WriteJSON(opts.IO.Out, i)
	}
	_, err := fmt.Fprintf(opts.IO.Out, "mptester %s (commit %s, built %s) %s %s/%s\n",
		i.Version, i.Commit, i.BuildDate, i.GoVersion, i.OS, i.Arch)
	return err
}
