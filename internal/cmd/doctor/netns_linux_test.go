package doctor_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmd"
	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/internal/nstest"
	"github.com/mptester/mptester/report"
)

// TestCLIInNetns runs `mptester doctor --json` inside a namespace with
// wlan0 and wwan0 and strict rp_filter on wwan0: exit status 7, a valid
// envelope, and the failing check carries its fix.
func TestCLIInNetns(t *testing.T) {
	ns := nstest.New(t)
	gw := nstest.New(t)
	for i, name := range []string{"wlan0", "wwan0"} {
		n := string(rune('1' + i))
		ns.Veth(name, gw, "gw"+n)
		ns.IP("addr", "add", "198.18."+n+".2/24", "dev", name)
		gw.IP("addr", "add", "198.18."+n+".1/24", "dev", "gw"+n)
		ns.IP("route", "add", "default", "via", "198.18."+n+".1", "dev", name, "metric", []string{"100", "200"}[i])
	}
	ns.Run("sysctl", "-qw", "net.ipv4.conf.wwan0.rp_filter=1")
	if !nstest.InNS(t, ns) {
		return
	}
	ios, out, errOut := cmdutil.Test()
	code := cmd.Run(context.Background(), ios, []string{"doctor", "--json"})
	assert.Equal(t, cmdutil.ExitCheckFailed, code, "stderr: %s", errOut)
	require.NoError(t, report.ValidateDocument(out.Bytes()), out.String())
	var doc struct {
		Records []map[string]string `json:"records"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
	found := false
	for _, r := range doc.Records {
		if r["id"] == "rp_filter.wwan0" {
			found = true
			assert.Equal(t, "fail", r["status"])
			assert.Equal(t, "sudo sysctl -w net.ipv4.conf.wwan0.rp_filter=2", r["fix"])
		}
	}
	assert.True(t, found, "no rp_filter.wwan0 record in %s", out)
}
