package collect

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"path/filepath"

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
func withServer(ctx context.Context, opts *Options, fn func(*collect.Server) error) error {
	if _, err := opts.rawConfig(); err != nil {
		return err
	}
	return withStore(ctx, opts, func(st store.Store) error {
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

// sharedIdentity is the TLS identity kept in the index database, created
// by the first replica to start.
func sharedIdentity(ctx context.Context, opts *Options) (tls.Certificate, string, error) {
	var c tls.Certificate
	err := withStore(ctx, opts, func(st store.Store) error {
		certPEM, keyPEM, err := st.Identity(ctx, func() ([]byte, []byte, error) {
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
