package patterns

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"time"

	"github.com/mptester/mptester/internal/fsutil"
	"github.com/mptester/mptester/patterns/transport"
)

// SelfSigned makes a certificate for names (DNS names or IP literals, plus
// localhost and the loopback addresses) and returns it with its SHA-256
// fingerprint, which clients pin with --pin.
func SelfSigned(names []string) (tls.Certificate, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "mptester test server"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if n != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, "", fmt.Errorf("self-signed certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, transport.Fingerprint(leaf), nil
}

// LoadCertificate reads a PEM certificate and key and returns the
// fingerprint of the leaf.
func LoadCertificate(certFile, keyFile string) (tls.Certificate, string, error) {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, "", fmt.Errorf("load certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return tls.Certificate{}, "", fmt.Errorf("parse certificate: %w", err)
	}
	c.Leaf = leaf
	return c, transport.Fingerprint(leaf), nil
}

// KeepSelfSigned is SelfSigned kept in file (certificate and key in one
// PEM file, 0600, written atomically): made on the first start, loaded on
// every later one, so a restarted server keeps the fingerprint its clients
// pinned. created says whether it was made now; names only apply then.
func KeepSelfSigned(file string, names []string) (cert tls.Certificate, fp string, created bool, err error) {
	if b, err := os.ReadFile(file); err == nil {
		c, err := tls.X509KeyPair(b, b)
		if err != nil {
			return tls.Certificate{}, "", false, fmt.Errorf("kept certificate %s: %w (remove it to make a new one; clients must pin the new fingerprint)", file, err)
		}
		if c.Leaf == nil {
			if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
				return tls.Certificate{}, "", false, fmt.Errorf("kept certificate %s: %w", file, err)
			}
		}
		return c, transport.Fingerprint(c.Leaf), false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return tls.Certificate{}, "", false, fmt.Errorf("kept certificate: %w", err)
	}
	c, fp, err := SelfSigned(names)
	if err != nil {
		return tls.Certificate{}, "", false, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		return tls.Certificate{}, "", false, err
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]})
	b = append(b, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})...)
	if err := fsutil.WriteFileAtomic(file, b, 0o600); err != nil {
		return tls.Certificate{}, "", false, fmt.Errorf("keep certificate: %w", err)
	}
	return c, fp, true, nil
}
