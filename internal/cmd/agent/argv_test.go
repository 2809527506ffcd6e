package agent

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/agent"
	"github.com/mptester/mptester/agent/caps"
	"github.com/mptester/mptester/collect/api"
	"github.com/mptester/mptester/internal/cmd/run"
	"github.com/mptester/mptester/internal/cmd/survey"
	"github.com/mptester/mptester/internal/cmdutil"
)

// TestArgvParses: the argv the agent builds from every typed parameter is
// accepted by the real survey and run commands, every value arrives where
// the task put it, the only files named are the agent's own (in its state
// directory), and the result goes to the spool.
func TestArgvParses(t *testing.T) {
	s, err := api.ParseSchedule([]byte(`{"tasks":[
	 {"name":"s","type":"survey","every":"1h","survey":{"domains":["a.example","b.example"],"paths":["wlan0","wwan0"],"family":"4",
	  "method":"tcp-connect","port":8443,"count":3,"timeout":"800ms","spacing":"10ms","rate":50,"dns_timeout":"700ms","dns_retries":1}},
	 {"name":"t","type":"survey","every":"1h","survey":{"list_id":"latest","top":500}},
	 {"name":"r","type":"run","every":"1h","run":{"servers":["a.example:443","198.51.100.7"],"ports":{"tcp":8443,"quic":8444,"mpquic":8445},
	  "quic_alt_port":0,"patterns":["ping","bulk"],"transports":["tcp","quic"],"paths":["wlan0","wwan0"],"backup":["wwan0"],"family":"both",
	  "pin":"` + strings.Repeat("ab", 32) + `","insecure":true,"server_name":"test.example","http1":true,"mode":"stable","size":500000,
	  "duration":"10s","chunk_size":1000,"interval":"50ms","ping_count":5,"iperf_direction":"download","pace":"0s","timeout":"30s",
	  "connect_timeout":"3s","seed":7,"stable":false,"capture":false,"grace":"5s"}}]}`))
	require.NoError(t, err)
	dir := t.TempDir()
	c := caps.Defaults()
	c.Budget = map[string]int64{"wwan0": 5_000_000}
	io, _, _ := cmdutil.Test()
	f := &cmdutil.Factory{IO: io, Logger: slog.New(slog.DiscardHandler)}
	parse := func(cmd *cobra.Command, args []string) {
		cmd.SetArgs(args)
		cmd.SetContext(context.Background())
		require.NoError(t, cmd.Execute(), "%v", args)
	}

	args, err := agent.Argv(s.Tasks[0], c, dir, map[string]int64{"wwan0": 1234})
	require.NoError(t, err)
	var so *survey.Options
	parse(survey.NewCmdSurvey(f, func(_ context.Context, o *survey.Options) error { so = o; return nil }), args[1:])
	assert.Equal(t, filepath.Join(dir, "lists", "s.csv"), so.List)
	assert.Equal(t, 2, so.Top)
	assert.Equal(t, []string{"wlan0", "wwan0"}, so.Paths)
	assert.Equal(t, 50.0, so.Rate)
	assert.Equal(t, 3, so.Count)
	assert.Equal(t, 8443, so.Port)
	assert.Equal(t, []string{"wwan0=1234"}, so.MaxBytes, "the budget left")
	assert.True(t, so.NoPrivate)
	assert.True(t, so.NoUpload)
	assert.Equal(t, "-", so.Out)

	args, err = agent.Argv(s.Tasks[1], c, dir, nil)
	require.NoError(t, err)
	parse(survey.NewCmdSurvey(f, func(_ context.Context, o *survey.Options) error { so = o; return nil }), args[1:])
	assert.Equal(t, "latest", so.ListID)
	assert.Equal(t, filepath.Join(dir, "cache"), so.CacheDir, "downloads land in the state directory")
	assert.Equal(t, 100.0, so.Rate, "the command's default rate, within the cap")

	args, err = agent.Argv(s.Tasks[2], c, dir, nil)
	require.NoError(t, err)
	var ro *run.Options
	parse(run.NewCmdRun(f, func(_ context.Context, o *run.Options) error { ro = o; return nil }), args[1:])
	assert.Equal(t, []string{"a.example:443", "198.51.100.7"}, ro.Servers)
	assert.Equal(t, []string{"ping", "bulk"}, ro.Patterns)
	assert.Equal(t, int64(500000), ro.Params.Size)
	assert.Equal(t, "-", ro.Output)
	assert.Empty(t, ro.QlogDir)
	assert.Empty(t, ro.Mobile.PcapDir)
	assert.False(t, ro.Stable)
	assert.True(t, ro.NoUpload)
	assert.Equal(t, "--no-upload", args[len(args)-1])
}

// TestShippedCaps: the packages' commented agent: example parses strictly
// into the caps it documents.
func TestShippedCaps(t *testing.T) {
	b, err := os.ReadFile("../../../packaging/mptester.yaml")
	require.NoError(t, err)
	_, block, ok := strings.Cut(string(b), "# agent:\n")
	require.True(t, ok)
	example := "agent:\n" + regexp.MustCompile(`(?m)^# (  [a-z_]+:.*)$`).ReplaceAllString(block, "$1")
	cfg, err := cmdutil.ParseConfig([]byte(example))
	require.NoError(t, err, example)
	c, err := Caps(cfg)
	require.NoError(t, err)
	assert.Equal(t, caps.Caps{MaxRate: 200, MaxDuration: api.Duration(2 * time.Minute), Types: []string{"survey", "run"},
		Paths: []string{"wlan0", "wwan0"}, Budget: map[string]int64{"wwan0": 2_000_000_000}}, c)
	def, err := Caps(nil)
	require.NoError(t, err)
	assert.Equal(t, caps.Defaults(), def)

	_, err = cmdutil.ParseConfig([]byte("agent:\n  schedule_key: c2hvcnQ=\n  budget: {wwan0: lots}\n  measurements: [shell]\n"))
	require.Error(t, err)
	for _, want := range []string{"agent.schedule_key: want the base64 Ed25519 public key", "agent.budget.wwan0", `"shell": want survey or run`} {
		assert.Contains(t, err.Error(), want)
	}
	cfg, err = cmdutil.ParseConfig([]byte("agent:\n  schedule_key: " + strings.Repeat("A", 43) + "=\n"))
	require.NoError(t, err)
	c, err = Caps(cfg)
	require.NoError(t, err)
	assert.Len(t, c.ScheduleKey, 32)
}
