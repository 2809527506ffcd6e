// Package config reads the strict YAML config file. Unknown keys are an
// error naming the key and the file; command-line flags override it.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"gopkg.in/yaml.v3"
)

// Config is the whole file. Each command reads its own section.
type Config struct {
	// ProbeID identifies this probe in uploaded results; stable per machine.
	ProbeID  string `yaml:"probe_id"`
	LogLevel string `yaml:"log_level"`
	// DNS maps an interface name to its resolvers ("ADDR" or "ADDR:PORT").
	DNS    map[string][]string `yaml:"dns"`
	Survey Survey              `yaml:"survey"`
	Run    Run                 `yaml:"run"`
	// Upload, when present, spools every result and uploads it to a
	// collect server (package upload).
	Upload *Upload `yaml:"upload"`
}

// Upload is the probe's link to its collect server.
type Upload struct {
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

// Survey holds defaults for `mptester survey`.
type Survey struct {
	Top      int      `yaml:"top"`
	List     string   `yaml:"list"`
	Paths    []string `yaml:"paths"`
	Family   string   `yaml:"family"`
	Method   string   `yaml:"method"`
	Port     int      `yaml:"port"`
	Count    int      `yaml:"count"`
	Timeout  string   `yaml:"timeout"`
	Rate     float64  `yaml:"rate"`
	CacheDir string   `yaml:"cache_dir"`
	// PublicPrefixes are treated as public although the bogon table lists
	// them (the lab's synthetic Internet lives in 198.18.0.0/15, fd00::/8).
	PublicPrefixes []string `yaml:"public_prefixes"`
	// Spacing is the minimum time between two probes of one target ("100ms").
	Spacing string `yaml:"spacing"`
	// AllowCrossPrivate probes private addresses from every path.
	AllowCrossPrivate bool `yaml:"allow_cross_private"`
	// MaxBytes caps the bytes sent per metered path: {wwan0: 50MB}.
	MaxBytes map[string]string `yaml:"max_bytes"`
}

// Run holds defaults for `mptester run`.
type Run struct {
	Servers    []string `yaml:"servers"`
	Patterns   []string `yaml:"patterns"`
	Transports []string `yaml:"transports"`
	Paths      []string `yaml:"paths"`
	Pin        string   `yaml:"pin"`
}

// Load reads and strictly decodes path.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cfg, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return cfg, nil
}

// Parse strictly decodes YAML: unknown keys are reported by name and line.
func Parse(b []byte) (*Config, error) {
	cfg := &Config{}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return cfg, nil
}
