package doctor

import (
	"context"
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/probe/doctor"
	"github.com/mptester/mptester/report"
)

var fixedPaths = []probe.Path{{Name: "wwan0", Index: 3, Kind: probe.KindCellular, Up: true, Flags: []string{"up"},
	Addrs: []probe.Addr{{IP: netip.MustParseAddr("198.18.2.2"), PrefixLen: 24, Scope: probe.ScopeGlobal}}, DNS: []probe.DNSServer{}}}

// run executes `doctor args...` with planted paths and checks.
func run(t *testing.T, tty bool, checks []doctor.Check, args ...string) (string, error) {
	t.Helper()
	ios, out, _ := cmdutil.Test()
	ios.SetTTY(tty, false)
	f := &cmdutil.Factory{IO: ios}
	var gotDNS []string
	cmd := NewCmdDoctor(f, func(ctx context.Context, o *Options) error {
		o.Discover = func(_ context.Context, dns []string) ([]probe.Path, error) { gotDNS = dns; return fixedPaths, nil }
		o.Checks = func(context.Context, []probe.Path) []doctor.Check { return checks }
		o.ProbeID = func() string { return "p-test" }
		return doctorRun(ctx, o)
	})
	cmd.SetArgs(args)
	cmd.SetOut(out)
	err := cmd.ExecuteContext(context.Background())
	if len(args) > 0 && args[0] == "--dns" {
		assert.Equal(t, []string{args[1]}, gotDNS)
	}
	return out.String(), err
}

var (
	okCheck   = doctor.Check{ID: "privileges", Title: "Raw sockets", Status: doctor.StatusOK, Detail: "root"}
	warnCheck = doctor.Check{ID: "udp.rmem_max", Title: "UDP", Status: doctor.StatusWarn, Detail: "small", Fix: "sudo sysctl -w net.core.rmem_max=7500000"}
	failCheck = doctor.Check{ID: "rp_filter.wwan0", Title: "rp", Status: doctor.StatusFail, Detail: "strict", Fix: "sudo sysctl -w net.ipv4.conf.wwan0.rp_filter=2"}
)

func TestJSONShape(t *testing.T) {
	out, err := run(t, false, []doctor.Check{okCheck, warnCheck}, "--dns", "wwan0=198.18.2.1", "--json")
	require.NoError(t, err, "warnings exit 0")
	require.NoError(t, report.ValidateDocument([]byte(out)), out)
	var doc struct {
		Command string            `json:"command"`
		ProbeID string            `json:"probe_id"`
		Status  string            `json:"status"`
		Paths   []probe.Path      `json:"paths"`
		Config  map[string]any    `json:"config"`
		Records []json.RawMessage `json:"records"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	assert.Equal(t, "doctor", doc.Command)
	assert.Equal(t, "p-test", doc.ProbeID)
	assert.Equal(t, "ok", doc.Status)
	assert.Equal(t, []any{"wwan0=198.18.2.1"}, doc.Config["dns"])
	require.Len(t, doc.Paths, 1)
	require.Len(t, doc.Records, 2)
	var recs []map[string]any
	for _, r := range doc.Records {
		var m map[string]any
		require.NoError(t, json.Unmarshal(r, &m))
		recs = append(recs, m)
	}
	assert.Equal(t, map[string]any{"type": "check", "id": "privileges", "title": "Raw sockets", "status": "ok", "detail": "root"}, recs[0])
	assert.Equal(t, "sudo sysctl -w net.core.rmem_max=7500000", recs[1]["fix"])
	assert.Equal(t, "warn", recs[1]["status"])
}

func TestFailExitsSeven(t *testing.T) {
	for _, args := range [][]string{nil, {"--json"}} {
		out, err := run(t, false, []doctor.Check{okCheck, failCheck}, args...)
		require.ErrorIs(t, err, cmdutil.ErrCheckFailed)
		assert.Equal(t, cmdutil.ExitCheckFailed, cmdutil.ExitCode(err))
		assert.Contains(t, err.Error(), "1 of 2 checks failed")
		assert.Contains(t, out, "sudo sysctl -w net.ipv4.conf.wwan0.rp_filter=2", "the fix is printed before exiting")
	}
}

func TestTable(t *testing.T) {
	out, err := run(t, false, []doctor.Check{okCheck, warnCheck}, []string{}...)
	require.NoError(t, err)
	assert.Equal(t, "STATUS  CHECK         DETAIL\n"+
		"ok      privileges    root\n"+
		"warn    udp.rmem_max  small\n"+
		"                      fix: sudo sysctl -w net.core.rmem_max=7500000\n"+
		"\n1 ok, 1 warn, 0 fail\n", out)
	assert.NotContains(t, out, "\x1b[", "no colour when stdout is not a terminal")

	out, err = run(t, true, []doctor.Check{okCheck, failCheck})
	require.Error(t, err)
	assert.Contains(t, out, "\x1b[32mok\x1b[0m")
	assert.Contains(t, out, "\x1b[31mfail\x1b[0m")
}

func TestRejectsArgs(t *testing.T) {
	_, err := run(t, false, nil, "extra")
	require.Error(t, err)
}
