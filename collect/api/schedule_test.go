package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLegacyTasks: a task stored as command and args before tasks were
// typed migrates when every flag maps onto a parameter, and is refused
// naming the first flag that does not (files, safety overrides).
func TestLegacyTasks(t *testing.T) {
	s, err := ParseSchedule([]byte(`{"tasks":[
	 {"name":"p","command":"run","every":"1h","spread":"5m","args":["--server","a.example:443","--server=b.example","--tcp-port","8443",
	  "--quic-alt-port=0","--patterns","ping,bulk","--insecure","--pace","0s","--size","200000","--no-upload","--stable=false"]},
	 {"name":"s","command":"survey","every":"6h","args":["--top","100","--rate","50","--paths","wlan0,eth0","--timeout","800ms"]}]}`))
	require.NoError(t, err)
	zero, f := 0, false
	pace := Duration(0)
	assert.Equal(t, Task{Name: "p", Type: TypeRun, Every: Duration(time.Hour), Spread: Duration(5 * time.Minute), Run: &RunParams{
		Servers: []string{"a.example:443", "b.example"}, Ports: map[string]int{"tcp": 8443}, QUICAltPort: &zero,
		Patterns: []string{"ping", "bulk"}, Insecure: true, Pace: &pace, Size: 200000, Stable: &f}}, s.Tasks[0])
	assert.Equal(t, Task{Name: "s", Type: TypeSurvey, Every: Duration(6 * time.Hour), Survey: &SurveyParams{
		Top: 100, Rate: 50, Paths: []string{"wlan0", "eth0"}, Timeout: Duration(800 * time.Millisecond)}}, s.Tasks[1])

	for args, want := range map[string]string{
		`["-o","/tmp/x"]`:                    `tasks[0].args[0] (task x): "-o" is not a schedule parameter`,
		`["--top","1","--out=/tmp/x"]`:       "tasks[0].args[2] (task x): --out is not a parameter",
		`["--memprofile","/tmp/x"]`:          "--memprofile is not a parameter",
		`["--list","/etc/passwd"]`:           "--list is not a parameter",
		`["--resume","/etc/passwd"]`:         "--resume is not a parameter",
		`["--config","/etc/passwd"]`:         "--config is not a parameter",
		`["--allow-cross-private"]`:          "--allow-cross-private is not a parameter",
		`["--dns","wlan0=10.0.0.1"]`:         "--dns is not a parameter",
		`["--tranco-url","http://10.0.0.1"]`: "--tranco-url is not a parameter",
		`["--top"]`:                          "--top needs a value",
		`["--top","many"]`:                   `--top "many"`,
		`["--rate","5","--paths","../etc"]`:  "tasks[0].survey.paths[0]",
		`["--list-id","../../etc/shadow"]`:   "tasks[0].survey.list_id",
		`["--method","raw; rm -rf /"]`:       "tasks[0].survey.method",
		`["--count","0"]`:                    "tasks[0].survey.count",
		`["--family","5"]`:                   "tasks[0].survey.family",
		`["--timeout","-1s"]`:                "tasks[0].survey.timeout",
		`["--spacing","1x"]`:                 "tasks[0].survey.spacing",
		`["--dns-retries","99"]`:             "tasks[0].survey.dns_retries",
		`["--rate","-1"]`:                    "tasks[0].survey.rate",
		`["--port","70000"]`:                 "tasks[0].survey.port",
		`["--top","10000000"]`:               "tasks[0].survey.top",
	} {
		_, err := ParseSchedule([]byte(`{"tasks":[{"name":"x","command":"survey","every":"1h","args":` + args + `}]}`))
		require.ErrorIs(t, err, ErrInvalid, args)
		assert.Contains(t, err.Error(), want, args)
	}
}

// TestTypedTasks: the schema's and the checks' errors name the field.
func TestTypedTasks(t *testing.T) {
	for task, want := range map[string]string{
		`{"name":"x","type":"run","every":"1h"}`:                                             "tasks[0] (task x): missing property 'run'",
		`{"name":"x","type":"run","every":"1h","run":{"servers":[]}}`:                        "tasks[0].run.servers (task x): minItems",
		`{"name":"x","type":"run","every":"1h","run":{"servers":["/etc/passwd"]}}`:           "tasks[0].run.servers[0]",
		`{"name":"x","type":"run","every":"1h","run":{"servers":["a"],"patterns":["rm"]}}`:   "tasks[0].run.patterns[0]",
		`{"name":"x","type":"run","every":"1h","run":{"servers":["a"],"ports":{"ssh":22}}}`:  "tasks[0].run.ports",
		`{"name":"x","type":"run","every":"1h","run":{"servers":["a"],"pin":"zz"}}`:          "tasks[0].run.pin",
		`{"name":"x","type":"run","every":"1h","run":{"servers":["a"],"pcap":"/tmp"}}`:       "tasks[0].run (task x): additional properties 'pcap'",
		`{"name":"x","type":"survey","every":"1h","run":{"servers":["a"]}}`:                  "tasks[0]",
		`{"name":"x","type":"survey","every":"1h","survey":{"domains":["a"],"list_id":"X"}}`: "tasks[0].survey",
		`{"name":"../x","type":"survey","every":"1h"}`:                                       "tasks[0].name",
		`{"name":"x","type":"survey","every":"30s"}`:                                         "tasks[0].every (task x): must be at least 1m",
		`{"name":"x","type":"survey","every":"1h","windows":["25:00-26:00"]}`:                "tasks[0].windows[0]",
		`{"name":"x","type":"survey","every":"1h","extra":true}`:                             "tasks[0] (task x): additional properties 'extra'",
		`{"name":"x","type":"survey","every":"1h","survey":{"domains":["-o"]}}`:              "tasks[0].survey.domains[0]",
	} {
		_, err := ParseSchedule([]byte(`{"tasks":[` + task + `]}`))
		require.ErrorIs(t, err, ErrInvalid, task)
		assert.Contains(t, err.Error(), want, task)
	}
	_, err := ParseSchedule([]byte(`{"tasks":[{"name":"x","type":"survey","every":"1h"},{"name":"x","type":"survey","every":"2h"}]}`))
	assert.ErrorContains(t, err, "tasks[1].name (task x): a unique name is required")
	_, err = ParseSchedule([]byte(`{"tasks":[],"bogus":1}`))
	assert.ErrorContains(t, err, "additional properties 'bogus'")

	// The agent's lenient form keeps the good tasks.
	s, bad, err := ParseScheduleTasks([]byte(`{"revision":3,"tasks":[{"name":"ok","type":"survey","every":"1h"},{"name":"bad","type":"survey","every":"1h","survey":{"rate":"fast"}}]}`))
	require.NoError(t, err)
	require.Len(t, s.Tasks, 1)
	assert.Equal(t, int64(3), s.Revision)
	require.Len(t, bad, 1)
	assert.Equal(t, "bad", bad[0].Task)
	assert.Equal(t, "tasks[1].survey.rate", bad[0].Field)
}

// TestScheduleRoundTrip: what the collector serves (the parsed schedule
// marshalled) parses again to the same schedule.
func TestScheduleRoundTrip(t *testing.T) {
	in := `{"tasks":[{"name":"p","type":"run","every":"1h","run":{"servers":["a.example"],"pace":"0s","stable":false,"quic_alt_port":0}},
	 {"name":"s","type":"survey","every":"6h","survey":{"domains":["a.example","b.example"],"dns_retries":0}}],"upload":{"path":"wlan0"}}`
	s, err := ParseSchedule([]byte(in))
	require.NoError(t, err)
	b, err := json.Marshal(s)
	require.NoError(t, err)
	s2, err := ParseSchedule(b)
	require.NoError(t, err, "%s", b)
	assert.Equal(t, s, s2)
	assert.True(t, strings.Contains(string(ScheduleSchema()), `"$id"`))
}

// FuzzParseSchedule: any bytes either parse into tasks that pass the
// checks again after a round trip, or are refused with an error; never a
// panic.
func FuzzParseSchedule(f *testing.F) {
	for _, s := range []string{`{"tasks":[]}`, `{"tasks":[{"name":"s","type":"survey","every":"1h","survey":{"domains":["a.example"],"rate":5}}]}`,
		`{"tasks":[{"name":"p","command":"run","every":"1h","args":["--server","a","--size","5","-o","/x"]}]}`,
		`{"tasks":[{"name":"p","type":"run","every":"1h","run":{"servers":["[::1]:443"],"ports":{"tcp":1}}}],"upload":{"every":"1h","windows":["22:00-02:00"]}}`,
		`{"tasks":[{"name":"p","command":"survey","every":"1h","args":["--top=5","--paths","a,b,,c"]}]}`, `[`, `{"tasks":{}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, bad, err := ParseScheduleTasks(b)
		if err != nil {
			return
		}
		for _, fe := range bad {
			if fe.Field == "" || fe.Reason == "" {
				t.Fatalf("an error without a field or reason: %#v", fe)
			}
		}
		out, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseSchedule(out); err != nil {
			t.Fatalf("accepted tasks fail again: %v\n%s", err, out)
		}
	})
}
