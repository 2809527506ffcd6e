package config

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"math"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/mptester/mptester/probe"
)

// Checks are the checks of the names a config file holds, each owned by
// the package that defines the names (patterns/transport.CheckName,
// patterns.CheckName, certs.CheckPin, ...). The caller passes them all: a
// missing one is a programming error (Parse panics), never a value left
// unchecked.
type Checks struct {
	Transport func(string) error // a transport name
	Listener  func(string) error // a transport with a server side
	Pattern   func(string) error // a traffic pattern name
	Method    func(string) error // a survey probe method name
	Pin       func(string) error // a certificate fingerprint ("" is none)
}

func (k Checks) missing() string {
	switch {
	case k.Transport == nil:
		return "Transport"
	case k.Listener == nil:
		return "Listener"
	case k.Pattern == nil:
		return "Pattern"
	case k.Method == nil:
		return "Method"
	case k.Pin == nil:
		return "Pin"
	}
	return ""
}

// Checker collects one message per bad value, each naming where the value
// came from (a flag or file:line: key), so a user fixes them all at once.
type Checker struct{ msgs []string }

// Check records err against where (e.g. "--top" or cfg.Where("survey.top")).
func (c *Checker) Check(where string, err error) {
	if err != nil {
		c.add(where + ": " + err.Error())
	}
}

func (c *Checker) add(msg string) { c.msgs = append(c.msgs, msg) }

// Err is nil when every value was good.
func (c *Checker) Err() error {
	if len(c.msgs) == 0 {
		return nil
	}
	return Problems(slices.Clone(c.msgs))
}

// Problems are the bad values of one command line and config file.
type Problems []string

func (p Problems) Error() string {
	if len(p) == 1 {
		return p[0]
	}
	return fmt.Sprintf("%d problems:\n  %s", len(p), strings.Join(p, "\n  "))
}

// The rules below are shared by the flags and the config file, so one value
// gets the same check wherever it comes from.

// IntIn checks lo <= v <= hi.
func IntIn(v, lo, hi int) error {
	if v < lo || v > hi {
		return fmt.Errorf("must be in %d..%d (got %d)", lo, hi, v)
	}
	return nil
}

// Positive checks v > 0.
func Positive[T int | int64 | time.Duration](v T) error {
	if v <= 0 {
		return fmt.Errorf("must be positive (got %v)", v)
	}
	return nil
}

// NonNegative checks v >= 0.
func NonNegative[T int | int64 | time.Duration](v T) error {
	if v < 0 {
		return fmt.Errorf("must not be negative (got %v)", v)
	}
	return nil
}

// Rate checks a finite number > 0 (NaN and Inf compare false everywhere).
func Rate(v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		return fmt.Errorf("must be a finite number > 0 (got %v)", v)
	}
	return nil
}

// Family checks 4, 6 or both.
func Family(s string) error {
	_, err := probe.ParseFamily(s)
	if err != nil {
		return fmt.Errorf("invalid address family %q (want 4, 6 or both)", s)
	}
	return nil
}

// Unique names the first repeated item: running one test twice, or naming
// a path twice, is a mistake to report, not to do.
func Unique(items []string) error {
	seen := map[string]bool{}
	for _, s := range items {
		if seen[s] {
			return fmt.Errorf("%q given twice", s)
		}
		seen[s] = true
	}
	return nil
}

// Interfaces checks a list of interface names: non-empty, no separators,
// no duplicates. Whether they exist is checked against the host's paths.
func Interfaces(names []string) error {
	for _, n := range names {
		if err := InterfaceName(n); err != nil {
			return err
		}
	}
	return Unique(names)
}

// InterfaceName checks one name's syntax (Windows names hold spaces).
func InterfaceName(n string) error {
	if strings.TrimSpace(n) == "" || strings.ContainsAny(n, "=,/\n\t") || len(n) > 256 {
		return fmt.Errorf("invalid interface name %q", n)
	}
	return nil
}

// Names checks each name with check (a package's CheckName), without
// duplicates.
func Names(names []string, check func(string) error) error {
	for _, n := range names {
		if err := check(n); err != nil {
			return err
		}
	}
	return Unique(names)
}

// Prefixes checks CIDR prefixes.
func Prefixes(ps []string) error {
	for _, s := range ps {
		if _, err := netip.ParsePrefix(strings.TrimSpace(s)); err != nil {
			return fmt.Errorf("invalid prefix %q", s)
		}
	}
	return nil
}

// ByteSize parses a size such as 50MB; zero is refused.
func ByteSize(s string) (int64, error) {
	n, err := humanize.ParseBytes(s)
	if err != nil || n == 0 || n > math.MaxInt64 {
		return 0, fmt.Errorf("invalid size %q (want e.g. 50MB)", s)
	}
	return int64(n), nil
}

// LogLevel parses debug, info, warn or error.
func LogLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return 0, fmt.Errorf("invalid log level %q (want debug, info, warn or error)", s)
	}
	return l, nil
}

// Servers checks a list of HOST[:PORT] without blanks or duplicates.
func Servers(ss []string) error {
	for _, s := range ss {
		if strings.TrimSpace(s) == "" || strings.ContainsAny(s, " \t/") {
			return fmt.Errorf("invalid server %q (want HOST[:PORT])", s)
		}
	}
	return Unique(ss)
}

// BaseURL checks the base URL of an HTTP service: http or https, a host,
// no query.
func BaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q: want http(s)://HOST[:PORT][/PATH]", s)
	}
	return nil
}

// validate checks every key the file sets, each bad value its own message.
func (c *Config) validate(ch *Checker, k Checks) {
	w := c.Where
	if c.Has("log_level") {
		_, err := LogLevel(c.LogLevel)
		ch.Check(w("log_level"), err)
	}
	if c.Has("probe_id") && strings.TrimSpace(c.ProbeID) == "" {
		ch.Check(w("probe_id"), fmt.Errorf("must not be empty"))
	}
	ifaces := make([]string, 0, len(c.DNS))
	for k := range c.DNS {
		ifaces = append(ifaces, k)
	}
	slices.Sort(ifaces)
	for _, iface := range ifaces {
		key := "dns." + iface
		ch.Check(w(key), InterfaceName(iface))
		for _, a := range c.DNS[iface] {
			_, err := probe.ParseDNSServer(a)
			ch.Check(w(key), err)
		}
	}
	s := c.Survey
	check := func(key string, err error) {
		if c.Has(key) {
			ch.Check(w(key), err)
		}
	}
	ag := c.Agent
	check("agent.max_rate", Rate(ag.MaxRate))
	check("agent.max_duration", Positive(ag.MaxDuration.D()))
	for _, m := range ag.Measurements {
		if m != "survey" && m != "run" {
			ch.Check(w("agent.measurements"), fmt.Errorf("%q: want survey or run", m))
		}
	}
	for _, p := range ag.PublicPrefixes {
		if _, err := netip.ParsePrefix(strings.TrimSpace(p)); err != nil {
			ch.Check(w("agent.public_prefixes"), fmt.Errorf("invalid prefix %q", p))
		}
	}
	check("agent.paths", Interfaces(ag.Paths))
	if ag.ScheduleKey != "" { // empty: no key pinned
		_, err := ScheduleKey(ag.ScheduleKey)
		ch.Check(w("agent.schedule_key"), err)
	}
	for _, name := range slices.Sorted(maps.Keys(ag.Budget)) {
		ch.Check(w("agent.budget."+name), InterfaceName(name))
		_, err := ByteSize(ag.Budget[name])
		ch.Check(w("agent.budget."+name), err)
	}
	check("survey.top", Positive(s.Top))
	if c.Has("survey.list") && strings.TrimSpace(s.List) == "" {
		ch.Check(w("survey.list"), fmt.Errorf("must not be empty"))
	}
	check("survey.paths", Interfaces(s.Paths))
	check("survey.tranco_url", BaseURL(s.TrancoURL))
	check("survey.family", Family(s.Family))
	check("survey.method", k.Method(s.Method))
	check("survey.port", IntIn(s.Port, 1, 65535))
	check("survey.count", IntIn(s.Count, 1, 1000))
	check("survey.timeout", Positive(s.Timeout.D()))
	check("survey.spacing", NonNegative(s.Spacing.D()))
	check("survey.rate", Rate(s.Rate))
	check("survey.public_prefixes", Prefixes(s.PublicPrefixes))
	for path, size := range s.MaxBytes {
		key := "survey.max_bytes." + path
		ch.Check(w(key), InterfaceName(path))
		_, err := ByteSize(size)
		ch.Check(w(key), err)
	}
	r := c.Run
	check("run.servers", Servers(r.Servers))
	check("run.patterns", Names(r.Patterns, k.Pattern))
	check("run.transports", Names(r.Transports, k.Transport))
	check("run.paths", Interfaces(r.Paths))
	check("run.pin", k.Pin(r.Pin))
	check("run.public_prefixes", Prefixes(r.PublicPrefixes))
	v := c.Serve
	check("serve.transports", Names(v.Transports, k.Transport))
	check("serve.max_sessions", Positive(v.MaxSessions))
	check("serve.max_per_client", Positive(v.MaxPerClient))
	check("serve.max_duration", Positive(v.MaxDuration.D()))
	for _, name := range slices.Sorted(maps.Keys(v.Ports)) {
		key := "serve.ports." + name
		ch.Check(w(key), k.Listener(name))
		for _, p := range v.Ports[name] {
			ch.Check(w(key), IntIn(p, 0, 65535))
		}
	}
	// The upload section's values; the token file itself (mode, content)
	// is read by the commands that upload (upload.SettingsFrom).
	if u := c.Upload; u != nil {
		if !strings.HasPrefix(u.URL, "https://") && !strings.HasPrefix(u.URL, "http://") {
			ch.Check(w("upload.url"), fmt.Errorf("%q: want https://HOST[:PORT]", u.URL))
		}
		if !c.Has("upload.token_file") || strings.TrimSpace(u.TokenFile) == "" {
			ch.Check(w("upload"), fmt.Errorf("token_file is required"))
		}
		check("upload.pin", k.Pin(u.Pin))
		switch u.Compression {
		case "", "zstd", "gzip", "none":
		default:
			ch.Check(w("upload.compression"), fmt.Errorf("%q: want zstd, gzip or none", u.Compression))
		}
		if c.Has("upload.max_bytes") {
			_, err := ByteSize(u.MaxBytes)
			ch.Check(w("upload.max_bytes"), err)
		}
		check("upload.max_age", NonNegative(u.MaxAge))
		check("upload.timeout", NonNegative(u.Timeout))
		check("upload.retry_max", NonNegative(u.RetryMax))
		check("upload.attempts", NonNegative(u.Attempts))
		if u.Path != "" {
			ch.Check(w("upload.path"), InterfaceName(u.Path))
		}
	}
}

// OutputDir checks that dir ("" is allowed: none) is a directory or can be
// made as one: it does not exist and its parent is a directory. Nothing is
// created here; the command makes it once every input is valid.
func OutputDir(dir string) error {
	if dir == "" {
		return nil
	}
	if st, err := os.Stat(dir); err == nil {
		if !st.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	parent := filepath.Dir(filepath.Clean(dir))
	if st, err := os.Stat(parent); err != nil || !st.IsDir() {
		return fmt.Errorf("%s does not exist and neither does its parent directory %s", dir, parent)
	}
	return nil
}
