// Package upload implements `mptester upload`: send what the spool holds.
package upload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/upload"
)

// Options for `mptester upload`.
type Options struct {
	IO     *cmdutil.IOStreams
	Logger *slog.Logger
	F      *cmdutil.Factory

	Status bool
	JSON   bool
}

// NewCmdUpload builds the command; runF replaces uploadRun in tests.
func NewCmdUpload(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, F: f}
	cmd := &cobra.Command{
		Use:   "upload [--status]",
		Short: "Upload the results waiting in the spool to the collect server",
		Long: `Send every result in the spool (the config's upload: section) to the
collect server, oldest first. A result is deleted only after a 2xx receipt
whose sha256 equals the file's; one the server refuses (a 4xx other than
401, 408, 429) moves to rejected/ with the answer; everything else is
retried with exponential backoff and jitter, honouring Retry-After, and
left for the next run. A lock keeps two runs (cron) from sending the same
file. Exit 8 when results are still pending, 9 when the collector's
certificate is not the pinned one (not retried; the message names both
fingerprints), 10 when the collector refused results (moved to rejected/).

--status lists pending and rejected results without sending anything.`,
		Example: `  mptester upload                 # from cron, or after an outage
  mptester upload --status --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Logger = f.Logger
			return cmdutil.Dispatch(cmd.Context(), opts, runF, uploadRun)
		},
	}
	cmd.Flags().BoolVar(&opts.Status, "status", false, "list pending and rejected results; send nothing")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON")
	return cmd
}

// Status is what --status prints.
type Status struct {
	Spool    string        `json:"spool"`
	Pending  []upload.Item `json:"pending"`
	Rejected []upload.Item `json:"rejected"`
	Dropped  int64         `json:"dropped_unreported"`
	// Tmp: results being written now (or left by a process that died
	// less than upload.StaleTmp ago); TmpRemoved: leftovers removed at
	// this start.
	Tmp        []upload.Item `json:"tmp"`
	TmpRemoved int           `json:"tmp_removed"`
}

func uploadRun(ctx context.Context, opts *Options) error {
	set, err := opts.F.UploadSettings()
	if err != nil {
		return err
	}
	sp, err := upload.OpenSpool(set.SpoolDir, set.Quota)
	if err != nil {
		return err
	}
	if opts.Status {
		return printStatus(opts, sp)
	}
	err = opts.F.Upload(ctx, set, sp)
	if errors.Is(err, upload.ErrLocked) {
		opts.Logger.Info("another upload holds the spool; leaving it to that one", "spool", sp.Dir())
		return nil
	}
	return err
}

func printStatus(opts *Options, sp *upload.Spool) error {
	st := Status{Spool: sp.Dir(), Dropped: sp.Dropped()}
	var err error
	if st.Pending, err = sp.Pending(); err != nil {
		return err
	}
	if st.Rejected, err = sp.Rejected(); err != nil {
		return err
	}
	if st.Tmp, st.TmpRemoved, err = sp.Tmp(); err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.IO.Out, st)
	}
	tw := tabwriter.NewWriter(opts.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "spool %s: %d pending, %d rejected, %d dropped by the quota (not yet reported), %d being written (tmp/), %d cut-off leftovers removed\n",
		st.Spool, len(st.Pending), len(st.Rejected), st.Dropped, len(st.Tmp), st.TmpRemoved)
	for _, it := range st.Pending {
		fmt.Fprintf(tw, "pending\t%s\t%d bytes\t%s\n", it.Name, it.Bytes, it.ModTime.UTC().Format("2006-01-02T15:04:05Z"))
	}
	for _, it := range st.Rejected {
		fmt.Fprintf(tw, "rejected\t%s\t%d bytes\t%s\n", it.Name, it.Bytes, it.Answer)
	}
	for _, it := range st.Tmp {
		fmt.Fprintf(tw, "tmp\t%s\t%d bytes\t%s\n", it.Name, it.Bytes, it.ModTime.UTC().Format("2006-01-02T15:04:05Z"))
	}
	return tw.Flush()
}
