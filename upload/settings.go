package upload

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/mptester/mptester/internal/certs"
)

// Config is the config file's upload section: the probe's link to its
// collect server. SettingsFrom checks it.
type Config struct {
	URL string `yaml:"url"`
	// TokenFile holds the probe's token (mode 0600).
	TokenFile string `yaml:"token_file"`
	// Pin is the collector certificate's SHA-256 fingerprint (self-signed).
	Pin string `yaml:"pin"`
	// Spool directory (default /var/spool/mptester for root).
	Spool string `yaml:"spool"`
	// Path binds uploads to one interface (spare the metered LTE path).
	Path string `yaml:"path"`
	// Compression: zstd (default), gzip or none.
	Compression string `yaml:"compression"`
	// MaxBytes and MaxAge bound the spool; the oldest results go first.
	MaxBytes string        `yaml:"max_bytes"`
	MaxAge   time.Duration `yaml:"max_age"`
	// Timeout bounds the upload at the end of a measuring command.
	Timeout time.Duration `yaml:"timeout"`
	// Attempts per result and the longest pause between two (backoff).
	Attempts int           `yaml:"attempts"`
	RetryMax time.Duration `yaml:"retry_max"`
}

// Settings is the upload config section, checked once.
type Settings struct {
	URL         string
	Token       string
	Pin         *[32]byte
	SpoolDir    string
	Path        string
	Compression string
	Quota       Quota
	Timeout     time.Duration
	Backoff     Backoff
}

// DefaultTimeout bounds the upload at the end of a measuring command.
const DefaultTimeout = 2 * time.Minute

// DefaultSpoolDir is /var/spool/mptester for root, else under the home.
func DefaultSpoolDir() string {
	if os.Geteuid() == 0 && runtime.GOOS != "windows" {
		return "/var/spool/mptester"
	}
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "mptester", "spool")
	}
	return filepath.Join(os.TempDir(), "mptester-spool")
}

// SettingsFrom checks c: the URL, the token file (0600, 256-bit token),
// the pin, compression and quota. Every error names the key.
func SettingsFrom(c *Config) (Settings, error) {
	if c == nil {
		return Settings{}, errors.New("no upload section in the config")
	}
	s := Settings{URL: strings.TrimRight(c.URL, "/"), SpoolDir: c.Spool, Path: c.Path, Compression: c.Compression,
		Quota: Quota{MaxAge: c.MaxAge}, Timeout: c.Timeout}
	if !strings.HasPrefix(s.URL, "https://") && !strings.HasPrefix(s.URL, "http://") {
		return Settings{}, fmt.Errorf("upload.url %q: want https://HOST[:PORT]", c.URL)
	}
	if c.TokenFile == "" {
		return Settings{}, errors.New("upload.token_file: required")
	}
	fi, err := os.Stat(c.TokenFile)
	if err != nil {
		return Settings{}, fmt.Errorf("upload.token_file: %w", err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return Settings{}, fmt.Errorf("upload.token_file %s: mode %o, want 0600 (chmod 600 %s)", c.TokenFile, fi.Mode().Perm(), c.TokenFile)
	}
	b, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return Settings{}, fmt.Errorf("upload.token_file: %w", err)
	}
	if s.Token = strings.TrimSpace(string(b)); len(s.Token) != 64 {
		return Settings{}, fmt.Errorf("upload.token_file %s: want the 64 hex digits `mptester collect probe add` printed", c.TokenFile)
	}
	if c.Pin != "" {
		if !strings.HasPrefix(s.URL, "https://") {
			return Settings{}, fmt.Errorf("upload.pin is set but upload.url %q is not https://: the pin cannot be checked", c.URL)
		}
		pin, err := certs.ParseFingerprint(c.Pin)
		if err != nil {
			return Settings{}, fmt.Errorf("upload.pin: %w", err)
		}
		s.Pin = &pin
	}
	switch s.Compression {
	case "":
		s.Compression = CompressZstd
	case CompressZstd, CompressGzip, CompressNone:
	default:
		return Settings{}, fmt.Errorf("upload.compression %q: want zstd, gzip or none", s.Compression)
	}
	if c.MaxBytes != "" {
		n, err := humanize.ParseBytes(c.MaxBytes)
		if err != nil {
			return Settings{}, fmt.Errorf("upload.max_bytes: %w", err)
		}
		s.Quota.MaxBytes = int64(n)
	}
	if s.Quota.MaxAge < 0 || s.Timeout < 0 || c.RetryMax < 0 || c.Attempts < 0 {
		return Settings{}, errors.New("upload.max_age, timeout, attempts and retry_max must not be negative")
	}
	s.Backoff = DefaultBackoff()
	if c.Attempts > 0 {
		s.Backoff.Attempts = c.Attempts
	}
	if c.RetryMax > 0 {
		s.Backoff.Max = c.RetryMax
		s.Backoff.Base = min(s.Backoff.Base, c.RetryMax)
	}
	if s.Timeout == 0 {
		s.Timeout = DefaultTimeout
	}
	if s.SpoolDir == "" {
		s.SpoolDir = DefaultSpoolDir()
	}
	return s, nil
}

// Client returns the uploader; dial, when set, binds its connections (to
// s.Path).
func (s Settings) Client(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *Client {
	return &Client{URL: s.URL, Token: s.Token, Compression: s.Compression, Path: s.Path, Backoff: s.Backoff,
		HTTP: &http.Client{Transport: Transport(s.Pin, dial)}}
}
