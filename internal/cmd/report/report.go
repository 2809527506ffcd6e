// Package report implements `mptester report`: result files in, the
// studies' tables out (text, Markdown or CSV).
package report

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/collect/rawstore"
	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/collect/storeinput"
	"github.com/mptester/mptester/internal/buildinfo"
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
	SVGDir  string
	PNGDir  string

	// --db: a collect store instead of files.
	DB    string
	Data  string
	Raw   rawstore.Flags // the collector's raw store, when not Data
	Probe string
	Type  string
	Since string
	Until string
}

// NewCmdReport builds the command; runF replaces reportRun in tests.
func NewCmdReport(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "report {FILE... | --db DSN [--probe P] [--type T] [--since T] [--until T]} [--format text|md|csv|json|html] [-o FILE]",
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
to write every table as NAME.csv. --format html writes one self-contained
page (tables and inline SVG plots, light and dark, readable on a phone;
it loads nothing); --format json holds every table and figure's data.
--svg DIR / --png DIR also write each figure as a file. Every format
carries provenance: the tool, the inputs' sha256 and schema versions, the
source and its filters.

--db DSN reads a collect server's store (its SQLite file, or postgres://…
with --data DIR naming the server's data directory, or with --raw
s3://BUCKET/PREFIX and the --s3-* flags naming its bucket as collect
takes them) instead of files:
--since and --until choose the window (the last 7 UTC days by default,
stated in the report): the fleet views (runs by status, reachability and
RTT quantiles per day, per probe and per cell or path) come from the
roll-ups as on the collect server's fleet page; --probe and --type choose
the runs whose raw uploads are read, one at a time through the same
reader, for the sections that need records (per run over time, survey
cells, patterns).`,
		Example: `  mptester report survey.jsonl.gz
  mptester report --format md -o report.md run-*.json survey.jsonl
  mptester report --format csv --section rtt-cdf survey.jsonl > cdf.csv
  mptester report --format csv --out-dir tables/ survey.jsonl
  mptester report --format html -o report.html --svg figs/ survey.jsonl run-*.json
  mptester report --db /var/lib/mptester/collect.db --since 2026-11-01 --format html -o fleet.html
  mptester report --db postgres://collect@db/fleet --raw s3://fleet/raw --s3-endpoint http://s3:8333 --s3-path-style`,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Files = args
			return cmdutil.Dispatch(cmd.Context(), opts, runF, reportRun)
		},
	}
	cmd.Flags().StringVar(&opts.Format, "format", "text", "output format: "+strings.Join(render.Formats, ", "))
	cmdutil.OutputFlag(cmd, &opts.Output, "write the report to this file (- for stdout)")
	cmd.Flags().StringVar(&opts.OutDir, "out-dir", "", "with --format csv: write every table as DIR/NAME.csv (DIR is created if needed)")
	cmd.Flags().StringVar(&opts.Section, "section", "", "print only this table (see the report's table names)")
	cmd.Flags().StringVar(&opts.SVGDir, "svg", "", "also write every figure as DIR/NAME.svg")
	cmd.Flags().StringVar(&opts.PNGDir, "png", "", "also write every figure as DIR/NAME.png")
	cmd.Flags().StringVar(&opts.DB, "db", "", "read a collect store instead of files: a SQLite file or postgres://…")
	cmd.Flags().StringVar(&opts.Data, "data", "", "with --db: the collect server's data directory (default: the SQLite file's directory)")
	// The collector's own raw-store flags, read the same way.
	opts.Raw.Add(cmd.Flags())
	cmd.Flags().StringVar(&opts.Probe, "probe", "", "with --db: only this probe's runs")
	cmd.Flags().StringVar(&opts.Type, "type", "", "with --db: only runs of this command (run or survey)")
	cmd.Flags().StringVar(&opts.Since, "since", "", "with --db: the window's start (RFC 3339, YYYY-MM-DD UTC, or 7d/36h back; default: 7 UTC days before --until)")
	cmd.Flags().StringVar(&opts.Until, "until", "", "with --db: the window's end, exclusive (as --since; default: the end of today, UTC)")
	return cmd
}

func reportRun(ctx context.Context, opts *Options) error {
	var filter storeinput.Filter
	switch {
	case opts.DB == "" && len(opts.Files) == 0:
		return cmdutil.Usage(errors.New("give result files, or --db DSN"))
	case opts.DB != "" && len(opts.Files) > 0:
		return cmdutil.Usage(errors.New("--db reads a collect store: give it without files"))
	case opts.DB == "":
		if opts.Raw != (rawstore.Flags{}) {
			return cmdutil.Usage(errors.New("--raw and --s3-* name a collect store's raw uploads: use them with --db"))
		}
		for _, f := range []struct{ name, v string }{{"--data", opts.Data}, {"--probe", opts.Probe}, {"--type", opts.Type}, {"--since", opts.Since}, {"--until", opts.Until}} {
			if f.v != "" {
				return cmdutil.Usage(fmt.Errorf("%s filters a collect store: use it with --db", f.name))
			}
		}
	default:
		var err error
		if filter, err = dbFilter(opts, time.Now()); err != nil {
			return cmdutil.Usage(err)
		}
	}
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
		if err := checkDir("--out-dir", opts.OutDir); err != nil {
			return err
		}
	} else if opts.Format == "csv" && opts.Section == "" {
		return cmdutil.Usage(errors.New("--format csv writes one table: choose it with --section, or give --out-dir"))
	}
	for _, d := range []struct{ flag, dir string }{{"--svg", opts.SVGDir}, {"--png", opts.PNGDir}} {
		if d.dir == "" {
			continue
		}
		if err := checkDir(d.flag, d.dir); err != nil {
			return err
		}
	}
	if err := cmdutil.CheckOutput(opts.Output, opts.Files...); err != nil {
		return cmdutil.Usage(fmt.Errorf("--output: %w", err))
	}
	aopts := analysis.Options{Tool: "mptester " + buildinfo.Version, Source: "files"}
	var rep *analysis.Report
	var err error
	if opts.DB != "" {
		rep, err = fromStore(ctx, opts, filter, aopts)
	} else {
		rep, err = analysis.AnalyzeSeq(slices.Values(analysis.Files(opts.Files...)), nil, aopts)
	}
	if err != nil {
		if errors.Is(err, analysis.ErrInput) {
			return cmdutil.Usage(err)
		}
		return err
	}
	defer rep.Close()
	for _, r := range rep.Runs {
		// A run of the store no report can read: skipped, and said so
		// here as in the provenance table (quarantine it to hide it).
		if strings.HasPrefix(r.Skipped, analysis.SkippedUnreadable) {
			fmt.Fprintf(opts.IO.ErrOut, "warning: run %s skipped: %s (hide it: mptester collect run quarantine %s)\n",
				r.Header.RunID, r.Skipped, r.Header.RunID)
		}
	}
	tables, figs := rep.Tables, rep.Figures
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
		figs = slices.DeleteFunc(slices.Clone(figs), func(f analysis.Figure) bool { return f.Name != opts.Section })
	}
	for _, d := range []struct{ dir, ext string }{{opts.SVGDir, "svg"}, {opts.PNGDir, "png"}} {
		if d.dir != "" {
			if err := os.MkdirAll(d.dir, 0o755); err != nil {
				return err
			}
			if err := render.WriteFigures(d.dir, d.ext, figs); err != nil {
				return err
			}
		}
	}
	if opts.OutDir != "" {
		if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
			return err
		}
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
	if err := render.Write(&b, opts.Format, tables, figs); err != nil {
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

func dbFilter(opts *Options, now time.Time) (storeinput.Filter, error) {
	f := storeinput.Filter{Probe: opts.Probe, Command: opts.Type}
	if f.Command != "" && f.Command != "run" && f.Command != "survey" {
		return f, fmt.Errorf("--type %q: want run or survey", f.Command)
	}
	for _, t := range []struct {
		flag, v string
		to      *time.Time
	}{{"--since", opts.Since, &f.Since}, {"--until", opts.Until, &f.Until}} {
		if t.v == "" {
			continue
		}
		v, err := storeinput.ParseWhen(t.v, now)
		if err != nil {
			return f, fmt.Errorf("%s %w", t.flag, err)
		}
		*t.to = v
	}
	// The fleet views' window, as the fleet page's: the last 7 UTC days
	// unless asked, never all history; stated in the provenance.
	f.Since, f.Until = storeinput.Bounds(f.Since, f.Until, now)
	if !f.Until.After(f.Since) {
		return f, errors.New("--until must be after --since")
	}
	s3, err := opts.Raw.Config("")
	if err != nil {
		return f, err
	}
	switch {
	case s3 != nil && opts.Data != "":
		return f, errors.New("--raw s3://… holds the raw uploads: give it without --data")
	case s3 != nil:
	case opts.Data == "" && storeinput.Kind(opts.DB) != "db sqlite":
		return f, errors.New("--db postgres://…: give --data, the collect server's data directory, or --raw s3://BUCKET/PREFIX")
	case opts.Data == "":
		opts.Data = filepath.Dir(strings.TrimPrefix(strings.TrimPrefix(opts.DB, "sqlite://"), "file:"))
	}
	if st, err := os.Stat(opts.Data); s3 == nil && (err != nil || !st.IsDir()) {
		return f, fmt.Errorf("--data %s: not a directory", opts.Data)
	}
	if storeinput.Kind(opts.DB) == "db sqlite" {
		// Opening would create and migrate a missing file: a typo must not.
		p := strings.TrimPrefix(strings.TrimPrefix(opts.DB, "sqlite://"), "file:")
		if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
			return f, fmt.Errorf("--db %s: no such SQLite file", opts.DB)
		}
	}
	return f, nil
}

// fromStore reads the chosen runs of a collect store, one page of index
// rows and one run at a time.
func fromStore(ctx context.Context, opts *Options, f storeinput.Filter, aopts analysis.Options) (*analysis.Report, error) {
	st, err := store.Open(ctx, opts.DB)
	if err != nil {
		return nil, cmdutil.Usage(fmt.Errorf("--db: %w", err))
	}
	defer st.Close()
	raw, err := opts.Raw.OpenReader(opts.Data)
	if err != nil {
		return nil, cmdutil.Usage(err)
	}
	// The fleet's aggregates come from the roll-ups (the fleet page's
	// views); the raw uploads are read, inside the window, only for the
	// sections that need records (per run, per pattern, per cell).
	win, err := storeinput.NewWindow(f.Since, f.Until, f.Probe, time.Now())
	if err != nil {
		return nil, cmdutil.Usage(err)
	}
	fleet, err := storeinput.FleetViews(ctx, st, win, nil)
	if err != nil {
		return nil, err
	}
	src := storeinput.New(st, raw)
	aopts.Source, aopts.Filters, aopts.Fleet, aopts.SkipBad = storeinput.Kind(opts.DB), f.Strings(), true, true
	seq, done := src.Inputs(ctx, f)
	rep, err := analysis.AnalyzeSeq(seq, done, aopts)
	if err != nil {
		return nil, err
	}
	withRollups(rep, fleet, f.Command != "")
	return rep, nil
}

// withRollups puts the roll-ups' fleet views into rep in place of the
// per-day aggregates the runs read would give (same names win for the
// roll-ups: one rendering, the fleet page's).
func withRollups(rep *analysis.Report, fleet storeinput.Fleet, typed bool) {
	if typed && len(fleet.Tables) > 0 {
		fleet.Tables[0].Note += "; --type does not filter the roll-ups (every command is counted)"
	}
	names := map[string]bool{"fleet-runs": true}
	for _, t := range fleet.Tables {
		names[t.Name] = true
	}
	rep.Tables = append(slices.DeleteFunc(rep.Tables, func(t analysis.Table) bool { return names[t.Name] }), fleet.Tables...)
	names = map[string]bool{}
	for _, g := range fleet.Figures {
		names[g.Name] = true
	}
	rep.Figures = append(slices.DeleteFunc(rep.Figures, func(g analysis.Figure) bool { return names[g.Name] }), fleet.Figures...)
}

// checkDir accepts a directory flag naming a directory, or one that does not
// exist yet and can be created (it is, after the inputs were read, so a bad
// input leaves nothing behind).
func checkDir(flag, dir string) error {
	st, err := os.Stat(dir)
	switch {
	case err == nil && st.IsDir():
		return nil
	case err == nil:
		return cmdutil.Usage(fmt.Errorf("%s %s: exists and is not a directory", flag, dir))
	case !errors.Is(err, os.ErrNotExist):
		return cmdutil.Usage(fmt.Errorf("%s %s: %v", flag, dir, err))
	}
	for p := filepath.Dir(filepath.Clean(dir)); ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err == nil {
			if !st.IsDir() {
				return cmdutil.Usage(fmt.Errorf("%s %s: %s is not a directory", flag, dir, p))
			}
			return nil
		}
		if !errors.Is(err, os.ErrNotExist) || p == filepath.Dir(p) {
			return cmdutil.Usage(fmt.Errorf("%s %s: %v", flag, dir, err))
		}
	}
}
