package cmd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mptester/mptester/internal/cmdutil"
)

// TestBadInputs walks every command with bad values, from flags and from a
// config file: each is a usage error (exit 2) whose message names the flag
// or the file:line: key, and a pre-existing output file is untouched.
func TestBadInputs(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	list := filepath.Join(dir, "list.csv")
	labDir := filepath.Join(dir, "lab")
	const precious = "precious\n"
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("list.csv", "1,example.com\n2,example.org\n")
	mkdir := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The output named with -o, and the lab directory, must stay as they are.
	assertUntouched := func(t *testing.T) {
		t.Helper()
		b, err := os.ReadFile(out)
		assert.NoError(t, err)
		assert.Equal(t, precious, string(b), "the output file was touched")
		_, err = os.Stat(labDir)
		assert.True(t, os.IsNotExist(err), "the lab directory was created")
	}
	survey := []string{"survey", "--list", list, "--paths", "lo", "-o", out}
	run := []string{"run", "--server", "127.0.0.1", "--insecure", "--paths", "lo", "-o", out}
	serve := []string{"serve", "--tcp-port", "0", "--quic-port", "0"}
	with := func(base []string, extra ...string) []string { return append(append([]string{}, base...), extra...) }

	for _, tc := range []struct {
		args []string
		want []string // each in the message
	}{
		{[]string{"nosuchcommand"}, []string{"unknown command"}},
		{[]string{"version", "extra"}, []string{"unknown command"}},
		{[]string{"version", "--bogus"}, []string{"--bogus"}},
		{[]string{"ifaces", "extra"}, []string{"unknown command"}},
		{[]string{"ifaces", "--dns", "nosuch0=198.18.0.1"}, []string{"--dns nosuch0", "no such interface"}},
		{[]string{"ifaces", "--dns", "lo"}, []string{"--dns"}},
		{[]string{"doctor", "extra"}, []string{"unknown command"}},
		{[]string{"doctor", "--dns", "nosuch0=198.18.0.1"}, []string{"--dns nosuch0"}},
		{[]string{"completion", "nosuchshell"}, []string{"nosuchshell"}},
		{[]string{"--log-level", "loud", "version"}, []string{"--log-level"}},

		{with(survey, "--rate", "NaN"), []string{"--rate", "NaN"}},
		{with(survey, "--rate", "+Inf"), []string{"--rate"}},
		{with(survey, "--rate", "-1", "--top", "-5", "--count", "0"), []string{"--rate", "--top", "--count", "3 problems"}},
		{with(survey, "--port", "70000"), []string{"--port"}},
		{with(survey, "--timeout", "0s"), []string{"--timeout"}},
		{with(survey, "--timeout", "5parsecs"), []string{"--timeout"}},
		{with(survey, "--spacing", "-1s"), []string{"--spacing"}},
		{with(survey, "--family", "7"), []string{"--family"}},
		{with(survey, "--method", "carrier-pigeon"), []string{"--method"}},
		{with(survey, "--paths", "lo,lo"), []string{"--paths", "twice"}},
		{with(survey, "--public-prefix", "10.0.0.0/33"), []string{"--public-prefix"}},
		{with(survey, "--max-bytes", "lo=0"), []string{"--max-bytes"}},
		{with(survey, "--list-id", "latest"), []string{"--list-id", "not both"}},
		{with(survey, "extra"), []string{"unknown command"}},
		{with(survey, "--dns", "nosuch0=198.18.0.1"), []string{"--dns nosuch0"}},
		{[]string{"survey", "--list", out, "--paths", "lo", "-o", out}, []string{"--output", "input"}},
		{[]string{"survey", "--list", list, "--paths", "lo", "--resume", out, "-o", out}, []string{"--resume", "different"}},
		{with(survey, "-o", filepath.Join(dir, "missing", "x.jsonl")), []string{"--output", "missing"}},
		{with(survey, "-o", dir), []string{"--output", "directory"}},
		{with(survey, "--out", out+".2"), []string{"output", "out"}},
		{[]string{"survey", "--list", filepath.Join(dir, "nolist.csv"), "--paths", "lo", "-o", out}, []string{"--list", "nolist.csv"}},

		{[]string{"report", filepath.Join(dir, "nosuch.jsonl"), "-o", out}, []string{"nosuch.jsonl"}},
		{[]string{"report", "--format", "bogus", list, "-o", out}, []string{"--format"}},
		{[]string{"report", list, "-o", out}, []string{"list.csv"}},
		{[]string{"report", "-o", out}, []string{"give result files, or --db"}},
		{[]string{"report", "--db", filepath.Join(dir, "nosuch.db"), "-o", out}, []string{"--db", "no such SQLite file"}},
		{[]string{"report", "--probe", "p1", list, "-o", out}, []string{"--probe", "with --db"}},
		{[]string{"report", "--db", "postgres://x@127.0.0.1:1/db", "-o", out}, []string{"--data"}},
		{[]string{"report", "--format", "html", "--svg", filepath.Join(list, "sub"), list, "-o", out}, []string{"--svg", "not a directory"}},
		{[]string{"analyze", filepath.Join(dir, "nosuch.pcap"), "-o", out}, []string{"nosuch.pcap"}},
		{[]string{"analyze", "--format", "bogus", list, "-o", out}, []string{"--format"}},
		{[]string{"analyze", list, "-o", out}, []string{"list.csv", "not a pcap"}},
		{[]string{"analyze", "--strict", write("cut.pcap", "\xd4\xc3\xb2\xa1\x02\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x04\x00\x01\x00\x00\x00\x01\x00\x00\x00"), "-o", out}, []string{"cut.pcap", "packet 1", "truncated"}},
		{[]string{"analyze", mkdir("empty"), "-o", out}, []string{"no capture files"}},
		{[]string{"analyze", "--idle-timeout", "0s", list, "-o", out}, []string{"--idle-timeout"}},
		{[]string{"analyze", "-o", out}, []string{"arg"}},
		{[]string{"collect", "--max-bytes", "-1"}, []string{"--max-bytes"}},
		{[]string{"collect", "--max-inflight", "0", "--retry-after", "0s"}, []string{"--max-inflight", "--retry-after"}},
		{[]string{"collect", "--cert", out}, []string{"--cert"}},
		{[]string{"collect", "probe", "add"}, []string{"arg"}},
		{[]string{"collect", "reindex", "extra"}, []string{"unknown command"}},
		{[]string{"collect", "export", "--format", "csv", "-o", dir}, []string{"--format", "parquet"}},
		{[]string{"collect", "export", "--since", "yesterday", "-o", dir}, []string{"--since", "yesterday"}},
		{[]string{"collect", "export", "--since", "2026-11-02", "--until", "2026-11-01", "-o", dir}, []string{"--until"}},
		{[]string{"collect", "export", "-o", out}, []string{"not a directory"}},
		{[]string{"collect", "export"}, []string{"-o DIR"}},
		{[]string{"upload", "extra"}, []string{"unknown command"}},
		{[]string{"upload"}, []string{"upload", "--config"}},
		{[]string{"agent", "--once", "extra"}, []string{"unknown command"}},
		{[]string{"agent", "--once"}, []string{"upload", "--config"}},
		{[]string{"fetch", "-o", out}, []string{"accepts 1 arg"}},
		{[]string{"fetch", "ftp://127.0.0.1/x", "-o", out}, []string{"URL", "http://"}},
		{[]string{"fetch", "http://127.0.0.1/x", "--tolerance", "-1s", "-o", out}, []string{"--tolerance"}},
		{[]string{"fetch", "http://127.0.0.1/x", "--json"}, []string{"--json", "-o FILE"}},
		{[]string{"fetch", "http://127.0.0.1/x", "--paths", "nosuch0", "-o", out}, []string{"--paths"}},
		{with(run, "--pace", "-1s"), []string{"--pace"}},
		{with(run, "--pin", strings.Repeat("ab", 32)), []string{"--pin", "not both"}},
		{with(run, "--patterns", "ping,ping"), []string{"--patterns", "twice"}},
		{with(run, "--transports", "tcp,tcp"), []string{"--transports", "twice"}},
		{with(run, "--transports", "carrier-pigeon"), []string{"--transports"}},
		{with(run, "--size", "0", "--duration", "-1s"), []string{"--size", "--duration"}},
		{with(run, "--tcp-port", "70000"), []string{"--tcp-port"}},
		{with(run, "--timeout", "-1s"), []string{"--timeout"}},
		{with(run, "--connect-timeout", "0s"), []string{"--connect-timeout"}},
		{with(run, "--server", "127.0.0.1,127.0.0.1"), []string{"--server", "twice"}},
		{with(run, "--iperf-direction", "sideways"), []string{"--iperf-direction"}},
		{with(run, "--family", "5"), []string{"--family"}},
		{with(run, "--mode", "sideways"), []string{"--mode"}},
		{with(run, "--pcap", dir), []string{"--pcap", "mobile only"}},
		{with(run, "--mode", "mobile", "--pcap", filepath.Join(dir, "missing")), []string{"--pcap", "not a directory"}},
		{with(run, "--mode", "mobile", "--transports", "tcp"), []string{"--transports", "handover", "mptcp"}},
		{with(run, "--mode", "mobile", "--patterns", "bulk", "--smoke"), []string{"--patterns", "--smoke"}},
		{with(run, "--mode", "mobile", "--grace", "0s", "--rto-threshold", "-1s"), []string{"--grace", "--rto-threshold"}},
		{with(run, "-o", filepath.Join(dir, "missing", "x.json")), []string{"--output"}},
		{with(run, "--mpquic-cc", "bbr"), []string{"--mpquic-cc", "bbr"}},
		{with(run, "extra"), []string{"unknown command"}},
		{[]string{"run", "--insecure", "-o", out}, []string{"--server", "required"}},

		{with(serve, "--max-sessions", "0"), []string{"--max-sessions"}},
		{with(serve, "--max-per-client", "-1"), []string{"--max-per-client"}},
		{with(serve, "--read-timeout", "0s"), []string{"--read-timeout"}},
		{with(serve, "--handshake-timeout", "-1s"), []string{"--handshake-timeout"}},
		{with(serve, "--client-prefix4", "40"), []string{"--client-prefix4"}},
		{[]string{"serve", "--quic-port", "4433", "--quic-port", "4433"}, []string{"--quic-port", "twice"}},
		{[]string{"serve", "--tcp-port", "70000"}, []string{"--tcp-port"}},
		{[]string{"serve", "--cert", out}, []string{"--key"}},
		{with(serve, "--mpquic-cc", "Cubic"), []string{"--mpquic-cc", "Cubic"}},
		{with(serve, "extra"), []string{"unknown command"}},

		{[]string{"lab", "nosuch"}, []string{"unknown command"}},
		{[]string{"lab", "set"}, []string{"arg"}},
		{[]string{"lab", "exec", "--dir", labDir}, []string{"arg"}},
		{[]string{"lab", "exec", "--dir", labDir, "--side", "moon", "--", "true"}, []string{"--side"}},
		{[]string{"lab", "run", "--dir", labDir, "--side", "moon", "--", "true"}, []string{"--side"}},
		{[]string{"lab", "up", "--dir", labDir, "--timeout", "0s"}, []string{"--timeout"}},
		{[]string{"lab", "up", "--dir", labDir, "--domains", "-1"}, []string{"--domains"}},
		{[]string{"lab", "up", "--dir", labDir, "--wlan0", "delay=fast"}, []string{"--wlan0"}},
		{[]string{"lab", "up", "--name", "no/slash"}, []string{"name"}},
		{[]string{"lab", "demo", "--dir", labDir, "--world-share", "nosuch=2"}, []string{"--world-share"}},
		{[]string{"lab", "status", "extra"}, []string{"unknown command"}},
		{[]string{"lab", "down", "extra"}, []string{"unknown command"}},
	} {
		// Names without the temporary directories: a re-run (gotestsum
		// -run NAME) must find the same subtest again.
		name := strings.NewReplacer(labDir, "LABDIR", dir, "DIR").Replace(strings.Join(tc.args, " "))
		t.Run(name, func(t *testing.T) {
			write("out.jsonl", precious)
			io, _, errOut := cmdutil.Test()
			code := Run(context.Background(), io, tc.args)
			assert.Equal(t, cmdutil.ExitUsage, code, "%s", errOut)
			for _, w := range tc.want {
				assert.Contains(t, errOut.String(), w)
			}
			assertUntouched(t)
		})
	}

	// The same bad values from a config file: every command refuses it at
	// load, naming file:line: key, one message per value.
	commands := [][]string{{"version"}, {"ifaces"}, {"doctor"}, survey, run, serve, {"lab", "status", "--dir", labDir}}
	for _, tc := range []struct {
		yaml string
		want []string
	}{
		{"survey: {top: -5, rate: -1}\n", []string{":1: survey.top", ":1: survey.rate", "2 problems"}},
		{"survey:\n  timeout: 5 parsecs\n", []string{":2: survey.timeout", "5 parsecs"}},
		{"survey:\n  rate: .nan\n", []string{":2: survey.rate", "NaN"}},
		{"survey:\n  top: many\n", []string{":2: survey.top"}},
		{"survey:\n  method: carrier-pigeon\n  family: 5\n", []string{":2: survey.method", ":3: survey.family"}},
		{"survey:\n  port: 0\n  count: 5000\n  spacing: -1s\n", []string{":2: survey.port", ":3: survey.count", ":4: survey.spacing"}},
		{"survey:\n  paths: [lo, lo]\n", []string{":2: survey.paths", "twice"}},
		{"survey:\n  max_bytes: {wwan0: lots}\n", []string{":2: survey.max_bytes.wwan0"}},
		{"survey:\n  public_prefixes: [10.0.0.0/33]\n", []string{":2: survey.public_prefixes"}},
		{"run:\n  transports: [carrier-pigeon]\n", []string{":2: run.transports"}},
		{"run:\n  patterns: [ping, ping]\n", []string{":2: run.patterns", "twice"}},
		{"run:\n  pin: abc\n", []string{":2: run.pin"}},
		{"dns:\n  lo: [not-an-address]\n", []string{":2: dns.lo"}},
		{"log_level: loud\n", []string{":1: log_level"}},
		{"survey:\n  ratee: 5\n", []string{":2", "ratee"}},
		{"upload:\n  url: ftp://x\n  token_file: /t\n  compression: lz4\n  timeout: -5s\n  attempts: -1\n  max_bytes: lots\n",
			[]string{":2: upload.url", ":4: upload.compression", ":5: upload.timeout", ":6: upload.attempts", ":7: upload.max_bytes"}},
		{"upload:\n  url: https://collect.test\n", []string{"upload", "token_file"}},
	} {
		cfg := write("bad.yaml", tc.yaml)
		for _, c := range commands {
			t.Run(strings.TrimSpace(tc.yaml)+" "+strings.Join(c, " "), func(t *testing.T) {
				write("out.jsonl", precious)
				io, _, errOut := cmdutil.Test()
				code := Run(context.Background(), io, append([]string{"--config", cfg}, c...))
				assert.Equal(t, cmdutil.ExitUsage, code, "%s", errOut)
				for _, w := range tc.want {
					assert.Contains(t, errOut.String(), w)
				}
				assert.Contains(t, errOut.String(), cfg)
				assertUntouched(t)
			})
		}
	}
}

// -o, --output names the output on every command that writes a file;
// --out is its hidden alias.
func TestOutputFlag(t *testing.T) {
	for _, c := range [][]string{{"survey"}, {"run"}} {
		io, out, _ := cmdutil.Test()
		assert.Equal(t, 0, Run(context.Background(), io, append(c, "--help")))
		assert.Contains(t, out.String(), "-o, --output file")
		assert.NotContains(t, out.String(), "--out ")
	}
}
