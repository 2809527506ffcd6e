// Package report implements `mptester report`: result files in, the
// studies' tables out (text, Markdown or CSV).
package report

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/report/analysis"
	"github.com/mptester/mptester/report/render"
)

// Options for `mptester report`.
type Options struct {
	IO *cmdutil.IOStreams

	Files   []string
	Format  string
	Output  string
	OutDir  string
	Section string
}

// NewCmdReport builds the command; runF replaces reportRun in tests.
func NewCmdReport(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "report FILE... [--format text|md|csv] [-o FILE] [--section NAME]",
		Short: "Turn result files into the studies' tables",
		Long: `Read survey and run results (JSON Lines streams or run documents, gzip'd
or not, any 1.x schema; the kind is read from the content) and print the
tables of studies 004 and 000: resolution per path, address overlap,
unresponsive servers per cell (004 Table I), RTT quantiles and the exact
ECDF per cell (004 Fig. 2), and per pattern x transport x path completion
time, goodput and ping RTT. Several files are combined. A file that
cannot be read fails the report (exit 2) naming the file and line, before
any output is written; a run that did not finish writing is shown as
truncated in the inputs table.

--format csv writes one table: choose it with --section, or give --out-dir
to write every table as NAME.csv.`,
		Example: `  mptester report survey.jsonl.gz
  mptester report --format md -o report.md run-*.json survey.jsonl
  mptester report --format csv --section rtt-cdf survey.jsonl > cdf.csv
  mptester report --format csv --out-dir tables/ survey.jsonl`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Files = args
			if runF != nil {
				return runF(opts)
			}
			return reportRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.Format, "format", "text", "output format: "+strings.Join(render.Formats, ", "))
	cmdutil.OutputFlag(cmd, &opts.Output, "write the report to this file (- for stdout)")
	cmd.Flags().StringVar(&opts.OutDir, "out-dir", "", "with --format csv: write every table as DIR/NAME.csv")
	cmd.Flags().StringVar(&opts.Section, "section", "", "print only this table (see the report's table names)")
	return cmd
}

func reportRun(opts *Options) error {
	if !slices.Contains(render.Formats, opts.Format) {
		return cmdutil.Usage(fmt.Errorf("--format %q: want one of %s", opts.Format, strings.Join(render.Formats, ", ")))
	}
	if opts.OutDir != "" {
		if opts.Format != "csv" {
			return cmdutil.Usage(errors.New("--out-dir writes CSV files: use it with --format csv"))
		}
		if opts.Output != "" && opts.Output != "-" {
			return cmdutil.Usage(errors.New("--out-dir and --output exclude each other"))
		}
		if st, err := os.Stat(opts.OutDir); err != nil || !st.IsDir() {
			return cmdutil.Usage(fmt.Errorf("--out-dir %s: not a directory", opts.OutDir))
		}
	} else if opts.Format == "csv" && opts.Section == "" {
		return cmdutil.Usage(errors.New("--format csv writes one table: choose it with --section, or give --out-dir"))
	}
	if err := cmdutil.CheckOutput(opts.Output, opts.Files...); err != nil {
		return cmdutil.Usage(fmt.Errorf("--output: %w", err))
	}
	rep, err := analysis.Analyze(analysis.Files(opts.Files...))
	if err != nil {
		if errors.Is(err, analysis.ErrInput) {
			return cmdutil.Usage(err)
		}
		return err
	}
	tables := rep.Tables
	if opts.Section != "" {
		t, ok := rep.Table(opts.Section)
		if !ok {
			var names []string
			for _, t := range rep.Tables {
				names = append(names, t.Name)
			}
			return cmdutil.Usage(fmt.Errorf("--section %q: this report has %s", opts.Section, strings.Join(names, ", ")))
		}
		tables = []analysis.Table{t}
	}
	if opts.OutDir != "" {
		for _, t := range tables {
			var b bytes.Buffer
			if err := render.CSV(&b, t); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(opts.OutDir, t.Name+".csv"), b.Bytes(), 0o644); err != nil {
				return err
			}
		}
		return nil
	}
	// Render in memory first, so a failure leaves the output file untouched.
	var b bytes.Buffer
	if err := render.Write(&b, opts.Format, tables); err != nil {
		return err
	}
	w, closeOut, err := cmdutil.CreateOutput("--output", opts.Output, opts.IO.Out)
	if err != nil {
		return err
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		closeOut()
		return err
	}
	return closeOut()
}
