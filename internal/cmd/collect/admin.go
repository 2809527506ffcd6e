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

// NewCmdAdminAdd builds `collect admin add`; runF replaces adminAddRun in
// tests.
func NewCmdAdminAdd(f *cmdutil.Factory, co *Options, runF func(context.Context, *NameOptions) error) *cobra.Command {
	opts := &NameOptions{IO: f.IO, Collect: co}
	return storeCmd(f, co, &cobra.Command{Use: "add NAME", Short: "Create an admin token (shown once)"}, opts, runF, adminAddRun, &opts.Name)
}

func adminAddRun(ctx context.Context, opts *NameOptions) error {
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
