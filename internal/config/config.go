// Package config reads the strict YAML config file and validates every
// value once, at load: unknown keys, wrong types and bad values are each
// reported with the file, line and key. Command-line flags override it.
package config

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/mptester/mptester/upload"
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
	Serve  Serve               `yaml:"serve"`
	// Upload, when present, spools every result and uploads it to a
	// collect server (package upload).
	Upload *upload.Config `yaml:"upload"`
	// Agent caps what fleet schedules may ask of this probe.
	Agent Agent `yaml:"agent"`

	file  string         // where it came from ("" when parsed from bytes)
	lines map[string]int // dotted key -> line of its value
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
	Timeout  Duration `yaml:"timeout"`
	Rate     float64  `yaml:"rate"`
	CacheDir string   `yaml:"cache_dir"`
	// TrancoURL is the base URL of the Tranco list service (a mirror).
	TrancoURL string `yaml:"tranco_url"`
	// PublicPrefixes are treated as public although the bogon table lists
	// them (the lab's synthetic Internet lives in 198.18.0.0/15, fd00::/8).
	PublicPrefixes []string `yaml:"public_prefixes"`
	// Spacing is the minimum time between two probes of one target ("100ms").
	Spacing Duration `yaml:"spacing"`
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
	// NoPrivate refuses private, local and special-purpose server
	// addresses at each dial (the fleet agent always asks for it).
	NoPrivate bool `yaml:"no_private"`
	// PublicPrefixes are public for NoPrivate despite the bogon table.
	PublicPrefixes []string `yaml:"public_prefixes"`
}

// Serve holds defaults for `mptester serve` (the packaged service reads
// them from /etc/mptester/serve.yaml); each key is the flag of its name.
type Serve struct {
	Listen string `yaml:"listen"`
	// Ports per listener (tcp, quic, mpquic): {quic: [443, 6121]}.
	Ports        map[string][]int `yaml:"ports"`
	Transports   []string         `yaml:"transports"`
	Names        []string         `yaml:"names"`
	State        string           `yaml:"state"`
	MaxSessions  int              `yaml:"max_sessions"`
	MaxPerClient int              `yaml:"max_per_client"`
	MaxDuration  Duration         `yaml:"max_duration"`
}

// Duration is a time.Duration written as Go writes it ("1s", "250ms").
type Duration time.Duration

// D is the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// UnmarshalYAML parses the string form; a bad one is a type error on its
// line, collected with the file's other type errors.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(strings.TrimSpace(n.Value))
	if err != nil || n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %q is not a duration (want e.g. 500ms, 2s, 1m)", n.Line, n.Value)}}
	}
	*d = Duration(v)
	return nil
}

// Load reads, strictly decodes and validates path, the names it holds
// with checks.
func Load(path string, checks Checks) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return parse(b, path, checks)
}

// Parse strictly decodes and validates YAML: unknown keys, wrong types and
// bad values (names by checks) are each reported by line and key.
func Parse(b []byte, checks Checks) (*Config, error) { return parse(b, "", checks) }

func parse(b []byte, file string, checks Checks) (*Config, error) {
	if m := checks.missing(); m != "" {
		panic("config: Checks." + m + " not set")
	}
	cfg := &Config{file: file, lines: map[string]int{}}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, cfg.located(err.Error())
	}
	keyLines(&doc, "", cfg.lines)
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, cfg.located(err.Error())
		}
		var ch Checker
		for _, e := range te.Errors {
			ch.add(cfg.typeError(e))
		}
		return nil, ch.Err()
	}
	var ch Checker
	cfg.validate(&ch, checks)
	if err := ch.Err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// located prefixes a message with the file name.
func (c *Config) located(msg string) error {
	if c.file == "" {
		return errors.New(msg)
	}
	return fmt.Errorf("%s: %s", c.file, msg)
}

var lineRE = regexp.MustCompile(`^line (\d+): (.*)$`)

// typeError turns yaml's "line N: msg" into "file:N: key: msg".
func (c *Config) typeError(e string) string {
	m := lineRE.FindStringSubmatch(e)
	if m == nil {
		return c.located(e).Error()
	}
	n, _ := strconv.Atoi(m[1])
	var keys []string
	for k, l := range c.lines {
		if l == n {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	// The innermost key on that line names the value.
	if len(keys) > 0 && !strings.HasPrefix(m[2], "field ") {
		return fmt.Sprintf("%s: %s", c.at(n, longest(keys)), m[2])
	}
	return fmt.Sprintf("%s: %s", c.at(n, ""), m[2])
}

func longest(keys []string) string {
	best := keys[0]
	for _, k := range keys {
		if strings.Count(k, ".") > strings.Count(best, ".") {
			best = k
		}
	}
	return best
}

func (c *Config) at(line int, key string) string {
	var s string
	switch {
	case c.file != "":
		s = fmt.Sprintf("%s:%d", c.file, line)
	default:
		s = fmt.Sprintf("config line %d", line)
	}
	if key != "" {
		s += ": " + key
	}
	return s
}

// keyLines records the line of every mapping key's value by dotted path.
func keyLines(n *yaml.Node, prefix string, out map[string]int) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			keyLines(c, prefix, out)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if prefix != "" {
				k = prefix + "." + k
			}
			out[k] = n.Content[i+1].Line
			keyLines(n.Content[i+1], k, out)
		}
	}
}

// Has reports whether the file sets key ("survey.top"): a key that is
// present is applied and checked even when its value is the zero value.
func (c *Config) Has(key string) bool {
	if c == nil {
		return false
	}
	_, ok := c.lines[key]
	return ok
}

// Where names key for a message: "file:line: key".
func (c *Config) Where(key string) string {
	if c == nil {
		return "config " + key
	}
	if l, ok := c.lines[key]; ok {
		return c.at(l, key)
	}
	if c.file != "" {
		return c.file + ": " + key
	}
	return "config " + key
}

// File is where the config came from ("" when parsed from bytes).
func (c *Config) File() string {
	if c == nil {
		return ""
	}
	return c.file
}

// Agent is the probe owner's caps over fleet tasks (package agent/caps):
// no schedule can raise them. Unset keys keep the defaults.
type Agent struct {
	// MaxRate bounds a survey's probes per second (default 200).
	MaxRate float64 `yaml:"max_rate"`
	// MaxDuration bounds a test's duration and timeouts (default 2m).
	MaxDuration Duration `yaml:"max_duration"`
	// Measurements are the types this probe runs (default survey, run).
	Measurements []string `yaml:"measurements"`
	// AllowPrivateTargets lets tasks name private, reserved and local
	// addresses (default never).
	AllowPrivateTargets bool `yaml:"allow_private_targets"`
	// PublicPrefixes are not private despite the bogon table (labs).
	PublicPrefixes []string `yaml:"public_prefixes"`
	// Paths may carry active traffic (default any).
	Paths []string `yaml:"paths"`
	// Budget is the data each path may carry per month: {wwan0: 2GB}.
	Budget map[string]string `yaml:"budget"`
	// ScheduleKey pins the fleet operator's Ed25519 public key (base64,
	// as `collect schedule keygen` prints it): only schedules it signed run.
	ScheduleKey string `yaml:"schedule_key"`
	// Textfile is node_exporter's textfile collector directory the
	// agent writes its figures to (agent --textfile).
	Textfile string `yaml:"textfile"`
}

// ScheduleKey decodes a pinned schedule key (base64 of 32 bytes).
func ScheduleKey(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != 32 {
		return nil, fmt.Errorf("want the base64 Ed25519 public key `collect schedule keygen` prints")
	}
	return b, nil
}
