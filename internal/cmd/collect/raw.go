package collect

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/collect/rawstore"
	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/internal/certs"
	"github.com/mptester/mptester/internal/cmdutil"
)

// rawConfig checks --raw and the --s3-* flags: nil for the data directory.
func (o *Options) rawConfig() (*rawstore.S3Config, error) {
	if o.InlineMax < 0 {
		return nil, cmdutil.FlagErrorf("--raw-inline-max %d: want 0 or more bytes", o.InlineMax)
	}
	c, err := o.Raw.Config(o.spool())
	if err != nil {
		return nil, cmdutil.FlagErrorf("%v", err)
	}
	return c, nil
}

// spool is where uploads bound for a bucket wait while they stream in.
func (o *Options) spool() string { return filepath.Join(o.Data, "s3-spool") }

// rawBackend opens the raw store the flags name.
func (o *Options) rawBackend() (rawstore.Backend, error) {
	c, err := o.rawConfig()
	if err != nil {
		return nil, err
	}
	if c == nil {
		return rawstore.NewDir(o.Data)
	}
	b, err := o.Raw.Open(o.Data, o.spool())
	if err != nil {
		return nil, cmdutil.FlagErrorf("%v", err)
	}
	return b, nil
}

func (o *Options) inlineMax() int {
	if o.InlineMax == 0 {
		return -1 // never inline
	}
	return int(o.InlineMax)
}

// withServer runs fn with a collect.Server on the flags' stores (for the
// maintenance subcommands; it does not listen).
func withServer(opts *Options, fn func(*collect.Server) error) error {
	if _, err := opts.rawConfig(); err != nil {
		return err
	}
	return withStore(opts, func(st store.Store) error {
		raw, err := opts.rawBackend()
		if err != nil {
			return err
		}
		srv, err := collect.New(collect.Config{Store: st, Data: opts.Data, Raw: raw, InlineMax: opts.inlineMax(),
			Limits: collect.DefaultLimits(), Logger: opts.Logger})
		if err != nil {
			return err
		}
		return fn(srv)
	})
}

func newCmdGC(f *cmdutil.Factory, opts *Options) *cobra.Command {
	var minAge time.Duration
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Remove raw uploads no index row names (a crash between storing and indexing; never acknowledged)",
		Long: `List the raw store (the data directory or the bucket) and remove every
object no index row names and older than --min-age: an upload cut off by a
crash after its object was stored and before its index row was committed.
It was never acknowledged, so its probe still holds it and sends it again.
--min-age spares uploads in flight on any replica.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			opts.Logger, opts.Ctx = f.Logger, c.Context()
			if minAge < 0 {
				return cmdutil.FlagErrorf("--min-age %s: want 0 or more", minAge)
			}
			return withServer(opts, func(srv *collect.Server) error {
				res, err := srv.GC(opts.Ctx, minAge, dryRun)
				fmt.Fprintf(opts.IO.Out, "%d objects, %d indexed, %d without an index row (%d younger than %s), %d removed\n",
					res.Objects, res.Indexed, res.Orphans, res.Young, minAge, res.Removed)
				return err
			})
		},
	}
	cmd.Flags().DurationVar(&minAge, "min-age", time.Hour, "leave objects younger than this")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list, remove nothing")
	return cmd
}

// sharedIdentity is the TLS identity kept in the index database, created
// by the first replica to start.
func sharedIdentity(opts *Options) (tls.Certificate, string, error) {
	var c tls.Certificate
	err := withStore(opts, func(st store.Store) error {
		certPEM, keyPEM, err := st.Identity(opts.Ctx, func() ([]byte, []byte, error) {
			c, _, err := certs.SelfSigned(opts.Names)
			if err != nil {
				return nil, nil, err
			}
			k, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
			if err != nil {
				return nil, nil, err
			}
			return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}),
				pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k}), nil
		})
		if err != nil {
			return err
		}
		if c, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
			return fmt.Errorf("stored tls identity: %w", err)
		}
		return nil
	})
	if err != nil {
		return tls.Certificate{}, "", err
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return tls.Certificate{}, "", err
	}
	c.Leaf = leaf
	return c, certs.Fingerprint(leaf), nil
}
