package lab_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/lab"
)

// The config a lab writes is a valid, strict mptester config (every check of the
// command layer) holding the
// per-path resolvers and the public target prefixes.
func TestConfigYAML(t *testing.T) {
	b, err := lab.ConfigYAML(labInfo())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := cmdutil.ParseConfig(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if got := cfg.DNS["wlan0"]; len(got) != 2 || got[0] != "198.18.100.1" || got[1] != "fd00:100::1" {
		t.Errorf("dns.wlan0 = %v", got)
	}
	if got := cfg.DNS["wwan0"]; len(got) != 2 || got[0] != "198.18.100.2" {
		t.Errorf("dns.wwan0 = %v", got)
	}
	if got := cfg.Survey.PublicPrefixes; len(got) != 2 || got[0] != "198.19.0.0/17" || got[1] != "fd00:ff::/64" {
		t.Errorf("survey.public_prefixes = %v", got)
	}
}

// labInfo is a lab named x with both paths as planned.
func labInfo() lab.Info {
	i := lab.Info{Name: "x", PublicPrefixes: lab.PublicPrefixes}
	for _, n := range lab.PathNames {
		p, _ := lab.Plan(n)
		i.Paths = append(i.Paths, p)
	}
	return i
}

// labConfig writes the config a lab writes, plus extra, and returns its
// path and the line extra starts on.
func labConfig(t *testing.T, extra string) (string, int) {
	t.Helper()
	b, err := lab.ConfigYAML(labInfo())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, append(b, extra...), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, strings.Count(string(b), "\n") + 1
}

// A lab's config with a bad transport, pattern or pin is refused at load,
// naming FILE:LINE and the key: the checks are those of the packages that
// own the names, passed by the command layer, whichever command reads it
// (lab status here, which never registered a check of its own).
func TestLabConfigBadNames(t *testing.T) {
	for _, c := range []struct{ extra, key, msg string }{
		{"run:\n  transports: [tcp, carrier-pigeon]\n", "run.transports", `unknown transport "carrier-pigeon"`},
		{"run:\n  patterns: [ping, smoke]\n", "run.patterns", `unknown pattern "smoke"`},
		{"run:\n  pin: zz\n", "run.pin", `invalid SHA-256 pin "zz"`},
		{"serve:\n  transports: [udp]\n", "serve.transports", `unknown transport "udp"`},
	} {
		path, line := labConfig(t, c.extra)
		want := path + ":" + strconv.Itoa(line+1) + ": " + c.key + ": " + c.msg
		_, err := cmdutil.LoadConfig(path)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: LoadConfig error %v, want %q", c.key, err, want)
		}
		code, _, stderr := run(t, "--config", path, "lab", "status", "--dir", t.TempDir())
		if code != cmdutil.ExitUsage || !strings.Contains(stderr, want) {
			t.Errorf("%s: lab status exit %d, stderr %q; want %d and %q", c.key, code, stderr, cmdutil.ExitUsage, want)
		}
	}
}
