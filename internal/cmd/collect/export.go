package collect

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/collect/export"
	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/collect/storeinput"
	"github.com/mptester/mptester/internal/cmdutil"
)

// ExportOptions of `mptester collect export`.
type ExportOptions struct {
	IO      *cmdutil.IOStreams
	Collect *Options // the stores

	Format, Since, Until, Probe, Out string
	// Strict fails (exit 3) when runs in range have no derived rows yet.
	Strict bool
}

// NewCmdExport builds `collect export`; runF replaces exportRun in tests.
func NewCmdExport(f *cmdutil.Factory, co *Options, runF func(context.Context, *ExportOptions) error) *cobra.Command {
	eo := &ExportOptions{IO: f.IO, Collect: co}
	cmd := storeCmd(f, co, &cobra.Command{
		Use:   "export --format parquet -o DIR",
		Short: "Write the index and the derived tables as Parquet, one file per table and day (DuckDB, pandas, Spark)",
		Long: `Write the runs and the derived tables (survey cells and probe records,
pattern tests and per-path bytes, mobile summaries) of the runs selected,
and the enrolled probes, as Parquet files under DIR:

  DIR/<table>/<YYYY-MM-DD>.parquet   (the UTC day the runs started)
  DIR/probes/probes.parquet

Timestamps are UTC nanoseconds, durations and RTTs integer nanoseconds
(columns *_ns), enums strings. A file is renamed into place only when
complete; an existing file of the same table and day is replaced.`,
		Example: `  mptester collect export --format parquet --since 2026-11-01 --until 2026-12-01 -o fleet-nov
  duckdb -c "SELECT probe_id, sum(bytes_received) FROM 'fleet-nov/pattern_path_bytes/*.parquet' GROUP BY 1"`,
	}, eo, runF, exportRun)
	fl := cmd.Flags()
	fl.StringVar(&eo.Format, "format", "parquet", "output `format` (parquet)")
	fl.StringVar(&eo.Since, "since", "", "runs started at or after this `time` (RFC 3339 or YYYY-MM-DD, UTC)")
	fl.StringVar(&eo.Until, "until", "", "runs started before this `time` (RFC 3339 or YYYY-MM-DD, UTC)")
	fl.StringVar(&eo.Probe, "probe", "", "only this probe's runs")
	fl.StringVarP(&eo.Out, "output", "o", "", "output `DIR` (created if need be)")
	fl.BoolVar(&eo.Strict, "strict", false, "fail (exit 3) when runs in range have no derived rows yet (the collector is still deriving them)")
	return cmd
}

func exportRun(ctx context.Context, eo *ExportOptions) error {
	if eo.Format != "parquet" {
		return cmdutil.FlagErrorf("--format %q: want parquet", eo.Format)
	}
	if eo.Out == "" {
		return cmdutil.FlagErrorf("-o DIR is required")
	}
	if fi, err := os.Stat(eo.Out); err == nil && !fi.IsDir() {
		return cmdutil.FlagErrorf("-o %s: not a directory", eo.Out)
	}
	var f store.ExportFilter
	f.Probe = eo.Probe
	for _, t := range []struct {
		name, v string
		dst     *time.Time
	}{{"--since", eo.Since, &f.Since}, {"--until", eo.Until, &f.Until}} {
		if t.v == "" {
			continue
		}
		v, err := storeinput.ParseTime(t.v)
		if err != nil {
			return cmdutil.FlagErrorf("%s %v", t.name, err)
		}
		*t.dst = v
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since) {
		return cmdutil.FlagErrorf("--until must be after --since")
	}
	return withStore(ctx, eo.Collect, func(st store.Store) error {
		files, err := export.Parquet(ctx, st, f, eo.Out)
		if err != nil {
			return err
		}
		for _, fl := range files {
			fmt.Fprintf(eo.IO.Out, "%s\t%d rows\n", fl.Path, fl.Rows)
		}
		missing, err := underivedIn(ctx, st, f)
		if err != nil || missing == 0 {
			return err
		}
		msg := fmt.Sprintf("%d runs in range have no derived rows yet: their derived tables are missing from the export (the collector derives them; or run `mptester collect reindex`)", missing)
		if eo.Strict {
			return fmt.Errorf("%w: %s", cmdutil.ErrPartial, msg)
		}
		fmt.Fprintf(eo.IO.ErrOut, "warning: %s\n", msg)
		return nil
	})
}

// underivedIn counts the parsed runs f selects whose derived rows were
// never written.
func underivedIn(ctx context.Context, st store.Store, f store.ExportFilter) (int, error) {
	n := 0
	var after int64
	for {
		page, err := st.ListUnderived(ctx, after)
		if err != nil || len(page) == 0 {
			return n, err
		}
		for _, r := range page {
			if (f.Probe == "" || r.ProbeID == f.Probe) && (f.Since.IsZero() || !r.StartedAt.Before(f.Since)) &&
				(f.Until.IsZero() || r.StartedAt.Before(f.Until)) {
				n++
			}
		}
		after = page[len(page)-1].Seq
	}
}
