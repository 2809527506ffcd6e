package collect

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/internal/cmdutil"
)

// GCOptions of `mptester collect gc`.
type GCOptions struct {
	IO      *cmdutil.IOStreams
	Collect *Options // the stores
	MinAge  time.Duration
	DryRun  bool
}

// NewCmdGC builds `collect gc`; runF replaces gcRun in tests.
func NewCmdGC(f *cmdutil.Factory, co *Options, runF func(context.Context, *GCOptions) error) *cobra.Command {
	opts := &GCOptions{IO: f.IO, Collect: co}
	cmd := storeCmd(f, co, &cobra.Command{
		Use:   "gc",
		Short: "Remove raw uploads no index row names (a crash between storing and indexing; never acknowledged)",
		Long: `List the raw store (the data directory or the bucket) and remove every
object no index row names and older than --min-age: an upload cut off by a
crash after its object was stored and before its index row was committed.
It was never acknowledged, so its probe still holds it and sends it again.
--min-age spares uploads in flight on any replica.`,
	}, opts, runF, gcRun)
	cmd.Flags().DurationVar(&opts.MinAge, "min-age", time.Hour, "leave objects younger than this")
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "list, remove nothing")
	return cmd
}

func gcRun(ctx context.Context, opts *GCOptions) error {
	if opts.MinAge < 0 {
		return cmdutil.FlagErrorf("--min-age %s: want 0 or more", opts.MinAge)
	}
	return withServer(ctx, opts.Collect, func(srv *collect.Server) error {
		res, err := srv.GC(ctx, opts.MinAge, opts.DryRun)
		fmt.Fprintf(opts.IO.Out, "%d objects, %d indexed, %d without an index row (%d younger than %s), %d removed\n",
			res.Objects, res.Indexed, res.Orphans, res.Young, opts.MinAge, res.Removed)
		return err
	})
}

// NewCmdReindex builds `collect reindex`; runF replaces reindexRun in
// tests.
func NewCmdReindex(f *cmdutil.Factory, co *Options, runF func(context.Context, *StoreOptions) error) *cobra.Command {
	return storeCmd(f, co, &cobra.Command{
		Use:   "reindex",
		Short: "Rebuild the derived tables (survey cells and probe records, pattern tests and per-path bytes) and the fleet views' roll-ups from the raw uploads, and remove raw files no run names",
	}, &StoreOptions{IO: f.IO, Collect: co}, runF, reindexRun)
}

func reindexRun(ctx context.Context, opts *StoreOptions) error {
	return withServer(ctx, opts.Collect, func(srv *collect.Server) error {
		n, err := srv.ReindexAll(ctx)
		fmt.Fprintf(opts.IO.Out, "reindexed %d runs\n", n)
		if err != nil {
			return err
		}
		n, err = srv.RemoveOrphans(ctx)
		fmt.Fprintf(opts.IO.Out, "removed %d raw files no run names (uploads cut off by a crash before their receipt)\n", n)
		return err
	})
}
