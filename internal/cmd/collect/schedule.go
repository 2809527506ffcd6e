package collect

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/collect/api"
	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/internal/cmdutil"
)

// ScheduleSetOptions of `mptester collect schedule set`.
type ScheduleSetOptions struct {
	IO      *cmdutil.IOStreams
	Collect *Options // the stores
	Probe   string   // a probe's name, or '*'
	File    string
}

// NewCmdScheduleSet builds `collect schedule set`; runF replaces
// scheduleSetRun in tests.
func NewCmdScheduleSet(f *cmdutil.Factory, co *Options, runF func(context.Context, *ScheduleSetOptions) error) *cobra.Command {
	opts := &ScheduleSetOptions{IO: f.IO, Collect: co}
	return storeCmd(f, co, &cobra.Command{
		Use:   "set PROBE|'*' FILE",
		Short: "Store FILE (JSON: typed measurement tasks, see GET /v1/schedule.schema.json) as the next revision of a probe's schedule ('*': every probe without its own)",
		Long: `Store FILE as the next revision of a probe's schedule ('*': every
probe without its own). A task is a measurement definition, not a command
line: {"name", "type": "survey"|"run", "every", "spread", "windows",
"survey": {...} | "run": {...}} with the typed parameters of the published
schema (GET /v1/schedule.schema.json). Nothing in a task names a file on
the probe or overrides a safety check. The schedule is checked against the
schema and the caps each probe reported (else the defaults) before it is
stored; PROBE must be enrolled.`,
	}, opts, runF, scheduleSetRun, &opts.Probe, &opts.File)
}

func scheduleSetRun(ctx context.Context, opts *ScheduleSetOptions) error {
	b, err := os.ReadFile(opts.File)
	if err != nil {
		return cmdutil.FlagErrorf("%v", err)
	}
	return withStore(ctx, opts.Collect, func(st store.Store) error {
		err := collect.CheckSchedule(ctx, st, opts.Probe, b)
		if errors.Is(err, api.ErrInvalid) || errors.Is(err, collect.ErrUnknownProbe) {
			return cmdutil.FlagErrorf("%s: %v", opts.File, err)
		}
		if err != nil {
			return err
		}
		rev, err := st.PutSchedule(ctx, opts.Probe, b)
		if errors.Is(err, store.ErrNotFound) {
			return cmdutil.FlagErrorf("%v", err)
		}
		if err == nil {
			fmt.Fprintf(opts.IO.Out, "schedule of %s: revision %d\n", opts.Probe, rev)
		}
		return err
	})
}
