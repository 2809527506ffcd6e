package api

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestScheduleBounds: every duration has an upper bound, ping_count the
// run command's lower one, a schedule at most 64 tasks, and what a
// refused task reports is bounded whatever the collector sent.
func TestScheduleBounds(t *testing.T) {
	for js, want := range map[string]string{
		`{"name":"x","type":"survey","every":"1h","survey":{"spacing":"11m"}}`:           "survey.spacing (task x): must be at most 10m0s",
		`{"name":"x","type":"survey","every":"1h","survey":{"dns_timeout":"11m"}}`:       "survey.dns_timeout (task x): must be at most 10m0s",
		`{"name":"x","type":"survey","every":"1h","survey":{"timeout":"11m"}}`:           "survey.timeout (task x): must be at most 10m0s",
		`{"name":"x","type":"run","every":"1h","run":{"servers":["a"],"duration":"2h"}}`: "run.duration (task x): must be at most 1h0m0s",
		`{"name":"x","type":"run","every":"1h","run":{"servers":["a"],"pace":"2h"}}`:     "run.pace (task x): must be at most 1h0m0s",
		`{"name":"x","type":"run","every":"1h","run":{"servers":["a"],"ping_count":1}}`:  "ping_count",
		`{"name":"x","type":"survey","every":"9000h"}`:                                   "every (task x): must be at most",
		`{"name":"x","type":"survey","every":"1h","spread":"9000h"}`:                     "spread (task x): must be at most",
	} {
		_, err := ParseSchedule([]byte(`{"tasks":[` + js + `]}`))
		if assert.Error(t, err, js) {
			assert.Contains(t, err.Error(), want, js)
		}
	}

	many := make([]string, 65)
	for i := range many {
		many[i] = fmt.Sprintf(`{"name":"t%d","type":"survey","every":"1h"}`, i)
	}
	_, _, err := ParseScheduleTasks([]byte(`{"tasks":[` + strings.Join(many, ",") + `]}`))
	require.ErrorContains(t, err, "65 tasks, at most 64")

	huge := strings.Repeat("\u00e9", 100000)
	bad := make([]string, 64)
	for i := range bad {
		bad[i] = fmt.Sprintf(`{"name":"%s%d","type":"survey","every":"1h","%s":1}`, huge, i, huge)
	}
	_, refused, err := ParseScheduleTasks([]byte(`{"tasks":[` + strings.Join(bad, ",") + `]}`))
	require.NoError(t, err)
	require.Len(t, refused, 64)
	total := 0
	for _, fe := range refused {
		total += len(fe.Error())
	}
	assert.Less(t, total, 64*1024, "64 refusals of at most about 1 KB each")
}
