package collect

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/internal/cmdutil"
)

// AdminAddOptions of `mptester collect admin add`.
type AdminAddOptions struct {
	IO      *cmdutil.IOStreams
	Collect *Options // the stores
	Name    string
}

// NewCmdAdminAdd builds `collect admin add`; runF replaces adminAddRun in
// tests.
func NewCmdAdminAdd(f *cmdutil.Factory, co *Options, runF func(context.Context, *AdminAddOptions) error) *cobra.Command {
	opts := &AdminAddOptions{IO: f.IO, Collect: co}
	return &cobra.Command{
		Use:   "add NAME",
		Short: "Create an admin token (shown once)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			co.Logger, opts.Name = f.Logger, args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return adminAddRun(c.Context(), opts)
		},
	}
}

func adminAddRun(ctx context.Context, opts *AdminAddOptions) error {
	if err := checkName(opts.Name); err != nil {
		return err
	}
	return withStore(ctx, opts.Collect, func(st store.Store) error {
		tok := collect.NewToken()
		if err := st.AddAdmin(ctx, opts.Name, collect.HashToken(tok), time.Now()); err != nil {
			return err
		}
		fmt.Fprintf(opts.IO.Out, "%s\n", tok)
		return nil
	})
}
