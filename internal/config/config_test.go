package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mptester/mptester/internal/certs"
	"github.com/mptester/mptester/patterns"
	"github.com/mptester/mptester/patterns/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseTyped(t *testing.T) {
	cfg, err := Parse([]byte("survey:\n  timeout: 2s\n  spacing: 0s\n  top: 10\nrun:\n  transports: [tcp, quic]\n"), checks)
	require.NoError(t, err)
	assert.Equal(t, 2*time.Second, cfg.Survey.Timeout.D())
	assert.True(t, cfg.Has("survey.spacing"), "a key set to its zero value is set")
	assert.False(t, cfg.Has("survey.rate"))
	assert.Equal(t, "config line 4: survey.top", cfg.Where("survey.top"))
}

// Each bad value is its own message, on its own line and key.
func TestParseProblems(t *testing.T) {
	_, err := Parse([]byte("probe_id: x\nsurvey:\n  top: 0\n  count: -1\n  timeout: soon\n"), checks)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "config line 5: survey.timeout")
	_, err = Parse([]byte("probe_id: x\nsurvey:\n  top: 0\n  count: -1\n"), checks)
	var p Problems
	require.ErrorAs(t, err, &p)
	assert.Equal(t, Problems{"config line 3: survey.top: must be positive (got 0)",
		"config line 4: survey.count: must be in 1..1000 (got -1)"}, p)
}

// FuzzParse: the config decoder never panics, and what it accepts parses
// again to the same values.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "probe_id: x\n", "survey: {top: -5, rate: -1}\n", "survey:\n  timeout: 5 parsecs\n",
		"dns:\n  lo: [198.18.0.1, '[fd00::1]:53']\n", "run:\n  patterns: [ping]\n  pin: zz\n", "- a\n- b\n", "survey: [1]\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := Parse(b, checks)
		if err != nil {
			return
		}
		again, err := Parse(b, checks)
		if err != nil || again.Survey.Top != cfg.Survey.Top || again.Survey.Timeout != cfg.Survey.Timeout {
			t.Fatalf("reparse differs: %v", err)
		}
	})
}

// checks are the checks of the packages that own the names, as the
// command layer passes them (cmdutil.ConfigChecks).
var checks = Checks{
	Transport: transport.CheckName,
	Listener:  transport.CheckListener,
	Pattern:   patterns.CheckName,
	Method: func(s string) error {
		if s != "udp" {
			return fmt.Errorf("unknown method %q", s)
		}
		return nil
	},
	Pin: certs.CheckPin,
}

// Every name the file holds is checked by the check its caller passed,
// each bad one reported by FILE:LINE and key. (Before the checks were
// passed, a package that loaded a config without the run command's init,
// as lab/labtest and upload did, accepted every one of these.)
func TestParseChecksNames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(path, []byte("run:\n  transports: [tcp, carrier-pigeon]\n  patterns: [smoke]\n  pin: zz\n"+
		"serve:\n  transports: [quic, quic]\n  ports: {udp: [53]}\nsurvey:\n  method: tcp-syn\n"+
		"upload:\n  url: https://198.18.0.1\n  token_file: /t\n  pin: yy\n"), 0o600))
	_, err := Load(path, checks)
	var p Problems
	require.ErrorAs(t, err, &p)
	assert.ElementsMatch(t, Problems{
		path + `:2: run.transports: unknown transport "carrier-pigeon" (want ` + strings.Join(transport.Names(), ", ") + ")",
		path + `:3: run.patterns: unknown pattern "smoke" (want ` + strings.Join(patterns.Names(), ", ") + ")",
		path + `:4: run.pin: invalid SHA-256 pin "zz" (want 64 hex digits)`,
		path + `:6: serve.transports: "quic" given twice`,
		path + `:7: serve.ports.udp: unknown listener "udp" (want one of tcp, quic, mpquic)`,
		path + `:9: survey.method: unknown method "tcp-syn"`,
		path + `:13: upload.pin: invalid SHA-256 pin "yy" (want 64 hex digits)`,
	}, p)
	_, err = Parse([]byte("run:\n  transports: [tcp, mptcp]\n  patterns: [ping]\n"), checks)
	require.NoError(t, err)
}

// A caller that forgets a check is a programming error, never a name left
// unchecked.
func TestParseNeedsEveryCheck(t *testing.T) {
	k := checks
	k.Pin = nil
	assert.PanicsWithValue(t, "config: Checks.Pin not set", func() { _, _ = Parse([]byte("probe_id: x\n"), k) })
}
