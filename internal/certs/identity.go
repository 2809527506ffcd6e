package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/mptester/mptester/internal/fsutil"
)

// An IdentityStore keeps one server identity: its certificate and private
// key as PEM. Create never replaces an identity (ErrIdentityExists), so
// servers racing to create one on a shared store all end up with the
// first; a replicated collector keeps it where its replicas share state.
type IdentityStore interface {
	// Load returns the identity, or ErrNoIdentity.
	Load(ctx context.Context) ([]byte, error)
	// Create stores pem durably unless an identity is there already.
	Create(ctx context.Context, pem []byte) error
	// String names the store in messages.
	String() string
}

var (
	ErrNoIdentity     = errors.New("no identity stored")
	ErrIdentityExists = errors.New("an identity is already stored")
)

// identityValidity is long: probes pin the certificate and never check its
// dates, and a new one blinds every probe until it is pinned again.
const identityValidity = 20 * 365 * 24 * time.Hour

// Keep returns the identity st holds, creating a self-signed one for names
// when it holds none (created says so). The fingerprint is what probes pin.
func Keep(ctx context.Context, st IdentityStore, names []string) (cert tls.Certificate, fp string, created bool, err error) {
	b, err := st.Load(ctx)
	if errors.Is(err, ErrNoIdentity) {
		if b, err = newIdentity(names); err != nil {
			return tls.Certificate{}, "", false, err
		}
		err = st.Create(ctx, b)
		if err == nil {
			created = true
		} else if errors.Is(err, ErrIdentityExists) { // another server was first: use its
			b, err = st.Load(ctx)
		}
	}
	if err != nil {
		return tls.Certificate{}, "", false, fmt.Errorf("TLS identity in %s: %w", st, err)
	}
	cert, err = tls.X509KeyPair(b, b)
	if err != nil {
		return tls.Certificate{}, "", false, fmt.Errorf("TLS identity in %s: %w", st, err)
	}
	if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
		return tls.Certificate{}, "", false, fmt.Errorf("TLS identity in %s: %w", st, err)
	}
	return cert, Fingerprint(cert.Leaf), created, nil
}

// newIdentity is a self-signed certificate and its key as PEM.
func newIdentity(names []string) ([]byte, error) {
	c, _, err := selfSigned(names, identityValidity)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		return nil, err
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]})
	return append(b, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})...), nil
}

// IdentityFile is the file store: one PEM file, mode 0600.
type IdentityFile string

// IdentityIn is the identity file of a data directory.
func IdentityIn(dir string) IdentityFile { return IdentityFile(filepath.Join(dir, "tls-identity.pem")) }

func (f IdentityFile) String() string { return string(f) }

// Load refuses a file others may read, as ssh does with a private key.
func (f IdentityFile) Load(context.Context) ([]byte, error) {
	fi, err := os.Stat(string(f))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoIdentity
	}
	if err != nil {
		return nil, err
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("mode %o, want 0600: the private key is readable by others (chmod 600 %s)", fi.Mode().Perm(), f)
	}
	return os.ReadFile(string(f))
}

// Create writes a temporary file, syncs it and links it to the name, which
// fails when the name exists: never a half-written or replaced identity.
func (f IdentityFile) Create(_ context.Context, b []byte) error {
	dir := filepath.Dir(string(f))
	tmp, err := os.CreateTemp(dir, ".tls-identity-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil && runtime.GOOS != "windows" {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), string(f)); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return ErrIdentityExists
		}
		return err
	}
	return fsutil.SyncDir(dir)
}

// Missing returns the names (DNS names or IP literals) cert is not valid
// for.
func Missing(cert *x509.Certificate, names []string) []string {
	var out []string
	for _, n := range names {
		if n != "" && cert.VerifyHostname(n) != nil {
			out = append(out, n)
		}
	}
	return out
}
