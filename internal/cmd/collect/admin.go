package collect

import (
	"context"
	"errors"
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

// NewCmdAdminRevoke builds `collect admin revoke`; runF replaces
// adminRevokeRun in tests.
func NewCmdAdminRevoke(f *cmdutil.Factory, co *Options, runF func(context.Context, *NameOptions) error) *cobra.Command {
	opts := &NameOptions{IO: f.IO, Collect: co}
	return storeCmd(f, co, &cobra.Command{Use: "revoke NAME",
		Short: "Revoke an admin's tokens (and end its fleet-page sessions); a probe of the same name is untouched"},
		opts, runF, adminRevokeRun, &opts.Name)
}

func adminRevokeRun(ctx context.Context, opts *NameOptions) error {
	return withStore(ctx, opts.Collect, func(st store.Store) error {
		if err := st.RevokeAdmin(ctx, opts.Name, time.Now()); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return cmdutil.FlagErrorf("%v", err)
			}
			return err
		}
		fmt.Fprintf(opts.IO.Out, "revoked admin %s\n", opts.Name)
		return nil
	})
}
