package caps

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect/api"
)

func task(t *testing.T, js string) api.Task {
	s, err := api.ParseSchedule([]byte(`{"tasks":[` + js + `]}`))
	require.NoError(t, err, js)
	return s.Tasks[0]
}

// TestCaps: every cap refuses what is over it and names the field; what
// is within passes; an owner's allowances widen only what they name.
func TestCaps(t *testing.T) {
	c := Defaults()
	c.MaxRate, c.MaxDuration, c.Paths = 100, api.Duration(time.Minute), []string{"wlan0"}
	for js, want := range map[string]string{
		`{"name":"x","type":"survey","every":"1h","survey":{"rate":101}}`:                                     "survey.rate",
		`{"name":"x","type":"survey","every":"1h","survey":{"timeout":"2m"}}`:                                 "survey.timeout",
		`{"name":"x","type":"run","every":"1h","run":{"servers":["a"],"duration":"61s"}}`:                     "run.duration",
		`{"name":"x","type":"run","every":"1h","run":{"servers":["a"],"grace":"5m"}}`:                         "run.grace",
		`{"name":"x","type":"run","every":"1h","run":{"servers":["a"],"paths":["wwan0"]}}`:                    "run.paths",
		`{"name":"x","type":"run","every":"1h","run":{"servers":["a"],"paths":["wlan0"],"backup":["wwan0"]}}`: "run.paths",
		`{"name":"x","type":"survey","every":"1h","survey":{"paths":["eth0"]}}`:                               "survey.paths",
		`{"name":"x","type":"run","every":"1h","run":{"servers":["10.0.0.1:443"]}}`:                           "10.0.0.1",
		`{"name":"x","type":"run","every":"1h","run":{"servers":["a"],"server_name":"127.0.0.1"}}`:            "127.0.0.1",
		`{"name":"x","type":"run","every":"1h","run":{"servers":["[fe80::1]:443"]}}`:                          "fe80::1",
		`{"name":"x","type":"run","every":"1h","run":{"servers":["db.localhost"]}}`:                           "db.localhost",
		`{"name":"x","type":"survey","every":"1h","survey":{"domains":["a.example","169.254.169.254"]}}`:      "169.254.169.254",
		`{"name":"x","type":"survey","every":"1h","survey":{"domains":["::ffff:192.168.1.1"]}}`:               "192.168.1.1",
	} {
		err := c.Check(task(t, js))
		require.ErrorIs(t, err, api.ErrInvalid, js)
		assert.Contains(t, err.Error(), want, js)
	}
	for _, js := range []string{`{"name":"x","type":"survey","every":"1h","survey":{"rate":100,"paths":["wlan0"],"domains":["a.example","8.8.8.8"]}}`,
		`{"name":"x","type":"run","every":"1h","run":{"servers":["a.example:443","[2001:4860::1]:443"],"duration":"1m"}}`} {
		assert.NoError(t, c.Check(task(t, js)), js)
	}
	c.Types = []string{api.TypeSurvey}
	assert.ErrorContains(t, c.Check(task(t, `{"name":"x","type":"run","every":"1h","run":{"servers":["a"]}}`)), `measurement type "run" is not allowed`)

	// The owner may allow private targets, or declare a prefix public.
	run := task(t, `{"name":"x","type":"run","every":"1h","run":{"servers":["a"]}}`)
	lab := netip.MustParseAddr("198.18.200.1")
	assert.Error(t, Defaults().CheckAddrs(run, "a", []netip.Addr{lab}))
	pub := Defaults()
	pub.Public = []netip.Prefix{netip.MustParsePrefix("198.18.200.0/24")}
	assert.NoError(t, pub.CheckAddrs(run, "a", []netip.Addr{lab}))
	assert.Error(t, pub.CheckAddrs(run, "a", []netip.Addr{lab}, netip.MustParsePrefix("198.18.200.0/24")), "the host's own subnet stays local")
	allow := Defaults()
	allow.AllowPrivate = true
	assert.NoError(t, allow.CheckAddrs(run, "a", []netip.Addr{netip.MustParseAddr("10.0.0.1")}))
}
