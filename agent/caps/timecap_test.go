package caps

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/mptester/mptester/collect/api"
)

// TestSurveyTimeShapes: a survey whose spacing or DNS waits alone would
// outlast the owner's max_duration is refused naming the field (on the
// collector against the reported caps, and on the probe); literal
// addresses that embed a private IPv4 one are refused.
func TestSurveyTimeShapes(t *testing.T) {
	c := Defaults()
	c.MaxDuration = api.Duration(30 * time.Second)
	for js, want := range map[string]string{
		`{"name":"x","type":"survey","every":"1h","survey":{"spacing":"40s"}}`:                      "survey.spacing",
		`{"name":"x","type":"survey","every":"1h","survey":{"spacing":"5s","count":10}}`:            "survey.spacing x count",
		`{"name":"x","type":"survey","every":"1h","survey":{"spacing":"4s"}}`:                       "survey.spacing x count", // default count 10
		`{"name":"x","type":"survey","every":"1h","survey":{"dns_timeout":"40s"}}`:                  "survey.dns_timeout",
		`{"name":"x","type":"survey","every":"1h","survey":{"dns_timeout":"10s","dns_retries":10}}`: "survey.dns_timeout x (dns_retries+1)",
		`{"name":"x","type":"survey","every":"1h","survey":{"domains":["64:ff9b::a9fe:a9fe"]}}`:     "64:ff9b::a9fe:a9fe",
		`{"name":"x","type":"run","every":"1h","run":{"servers":["[64:ff9b::a00:1]:8080"]}}`:        "64:ff9b::a00:1",
		`{"name":"x","type":"run","every":"1h","run":{"servers":["[::a00:1]:8081"]}}`:               "::a00:1",
	} {
		err := c.Check(task(t, js))
		if assert.Error(t, err, js) {
			assert.Contains(t, err.Error(), want, js)
		}
	}
	assert.NoError(t, c.Check(task(t, `{"name":"x","type":"survey","every":"1h","survey":{"spacing":"3s","count":10,"dns_timeout":"5s","dns_retries":5}}`)))
}
