// Package certs owns the TLS certificates mptester makes and the pins that
// check them: self-signed certificates, SHA-256 fingerprints, pinned client
// configurations, and an identity kept across restarts (identity.go). It
// imports only the standard library and internal/fsutil, so a client that
// checks a pin (the uploader) carries no transport code.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"time"
)

// MinVersion is the lowest TLS version any mptester client or server
// speaks.
const MinVersion = tls.VersionTLS12

// SelfSigned makes a certificate valid for a year for names (DNS names or
// IP literals, plus localhost and the loopback addresses) and returns it
// with its SHA-256 fingerprint, which clients pin.
func SelfSigned(names []string) (tls.Certificate, string, error) {
	return selfSigned(names, 365*24*time.Hour)
}

func selfSigned(names []string, valid time.Duration) (tls.Certificate, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "mptester test server"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(valid),
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
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, Fingerprint(leaf), nil
}

// Load reads a PEM certificate and key and returns the fingerprint of the
// leaf.
func Load(certFile, keyFile string) (tls.Certificate, string, error) {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, "", fmt.Errorf("load certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return tls.Certificate{}, "", fmt.Errorf("parse certificate: %w", err)
	}
	c.Leaf = leaf
	return c, Fingerprint(leaf), nil
}

// Fingerprint is the SHA-256 of a certificate, as hex with colons.
func Fingerprint(cert *x509.Certificate) string { return FormatPin(sha256.Sum256(cert.Raw)) }

// FormatPin writes a pin as Fingerprint does.
func FormatPin(sum [32]byte) string {
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = fmt.Sprintf("%02X", b)
	}
	return strings.Join(parts, ":")
}

// ParseFingerprint accepts 64 hex digits, with or without colons, any case.
func ParseFingerprint(s string) ([32]byte, error) {
	var out [32]byte
	h := strings.ReplaceAll(strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "sha256:"), ":", "")
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != 32 {
		return out, fmt.Errorf("invalid SHA-256 pin %q (want 64 hex digits)", s)
	}
	copy(out[:], b)
	return out, nil
}

// CheckPin checks a SHA-256 certificate fingerprint as a config file or a
// flag gives it; "" is no pin (a CA-signed server).
func CheckPin(s string) error {
	if s == "" {
		return nil
	}
	_, err := ParseFingerprint(s)
	return err
}

// ErrPinMismatch: the server's certificate is not the pinned one. A
// *PinError is it.
var ErrPinMismatch = errors.New("certificate pin mismatch")

// PinError names both fingerprints of a mismatch.
type PinError struct{ Got, Want [32]byte }

func (e *PinError) Error() string {
	return fmt.Sprintf("%v: the server's certificate is %s, the pin is %s", ErrPinMismatch, FormatPin(e.Got), FormatPin(e.Want))
}

// Is makes errors.Is(err, ErrPinMismatch) hold.
func (e *PinError) Is(target error) bool { return target == ErrPinMismatch }

// Pinned returns a client configuration that trusts exactly the leaf
// certificate whose SHA-256 is pin: the pin replaces chain verification,
// since a collector's or test server's certificate is usually self-signed.
func Pinned(serverName string, pin [32]byte) *tls.Config {
	return &tls.Config{ServerName: serverName, MinVersion: MinVersion, InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("server sent no certificate")
			}
			if got := sha256.Sum256(cs.PeerCertificates[0].Raw); got != pin {
				return &PinError{Got: got, Want: pin}
			}
			return nil
		}}
}

// ClientTLS builds a client configuration: a pinned SHA-256 leaf
// certificate fingerprint, no verification (insecure), or the system roots.
func ClientTLS(serverName, pin string, insecure bool) (*tls.Config, error) {
	switch {
	case pin != "":
		want, err := ParseFingerprint(pin)
		if err != nil {
			return nil, err
		}
		return Pinned(serverName, want), nil
	case insecure:
		return &tls.Config{ServerName: serverName, MinVersion: MinVersion, InsecureSkipVerify: true}, nil
	}
	return &tls.Config{ServerName: serverName, MinVersion: MinVersion}, nil
}
