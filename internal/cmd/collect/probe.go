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

// ProbeAddOptions of `mptester collect probe add`.
type ProbeAddOptions struct {
	IO      *cmdutil.IOStreams
	Collect *Options // the stores and the kept identity
	Name    string
	URL     string // the collector as probes reach it
}

// NewCmdProbeAdd builds `collect probe add`; runF replaces probeAddRun in
// tests.
func NewCmdProbeAdd(f *cmdutil.Factory, co *Options, runF func(context.Context, *ProbeAddOptions) error) *cobra.Command {
	opts := &ProbeAddOptions{IO: f.IO, Collect: co}
	cmd := storeCmd(f, co, &cobra.Command{
		Use:   "add NAME",
		Short: "Enrol a probe: prints its token (shown once) and its config lines",
	}, opts, runF, probeAddRun, &opts.Name)
	cmd.Flags().StringVar(&opts.URL, "url", "https://COLLECTOR:8080", "the collector's `URL` as probes reach it (for the config line)")
	return cmd
}

func probeAddRun(ctx context.Context, opts *ProbeAddOptions) error {
	if err := checkName(opts.Name); err != nil {
		return err
	}
	_, fp, err := keepIdentity(ctx, opts.Collect)
	if err != nil {
		return err
	}
	return withStore(ctx, opts.Collect, func(st store.Store) error {
		tok := collect.NewToken()
		if err := st.AddProbe(ctx, opts.Name, collect.HashToken(tok), time.Now()); err != nil {
			if errors.Is(err, store.ErrExists) {
				return cmdutil.FlagErrorf("%v (revoke it, or choose another name)", err)
			}
			return err
		}
		fmt.Fprintf(opts.IO.Out, "token: %s\n", tok)
		fmt.Fprintf(opts.IO.Out, "certificate SHA-256 fingerprint: %s\n", fp)
		fmt.Fprintf(opts.IO.Out, "# on the probe: the token in a 0600 file, and in its config (pin: the collector's kept\n# self-signed identity; with --cert/--key, that certificate's fingerprint, or no pin):\n")
		fmt.Fprintf(opts.IO.Out, "probe_id: %s\nupload: {url: %q, token_file: /etc/mptester/upload.token, pin: %q}\n", opts.Name, opts.URL, fp)
		return nil
	})
}

// NewCmdProbeRevoke builds `collect probe revoke`; runF replaces
// probeRevokeRun in tests.
func NewCmdProbeRevoke(f *cmdutil.Factory, co *Options, runF func(context.Context, *NameOptions) error) *cobra.Command {
	opts := &NameOptions{IO: f.IO, Collect: co}
	return storeCmd(f, co, &cobra.Command{Use: "revoke NAME", Short: "Revoke a probe's token: its uploads are refused from now on"},
		opts, runF, probeRevokeRun, &opts.Name)
}

func probeRevokeRun(ctx context.Context, opts *NameOptions) error {
	return withStore(ctx, opts.Collect, func(st store.Store) error {
		if err := st.Revoke(ctx, opts.Name, time.Now()); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return cmdutil.FlagErrorf("%v", err)
			}
			return err
		}
		fmt.Fprintf(opts.IO.Out, "revoked %s\n", opts.Name)
		return nil
	})
}

// NewCmdProbeList builds `collect probe list`; runF replaces probeListRun
// in tests.
func NewCmdProbeList(f *cmdutil.Factory, co *Options, runF func(context.Context, *StoreOptions) error) *cobra.Command {
	return storeCmd(f, co, &cobra.Command{Use: "list", Short: "List enrolled probes (JSON) with their owners' caps and the tasks they refused"},
		&StoreOptions{IO: f.IO, Collect: co}, runF, probeListRun)
}

func probeListRun(ctx context.Context, opts *StoreOptions) error {
	return withStore(ctx, opts.Collect, func(st store.Store) error {
		ps, err := collect.ListProbes(ctx, st)
		if err != nil {
			return err
		}
		return cmdutil.WriteJSON(opts.IO.Out, ps)
	})
}
