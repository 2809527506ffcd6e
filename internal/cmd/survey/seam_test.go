package survey

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmdutil"
)

func TestNewCmdSurveySeam(t *testing.T) {
	o, err := cmdutil.RunSeam(NewCmdSurvey, cmdutil.TestFactory(), "--top", "500", "--list", "top-1m.csv.zip", "--paths", "wlan0,wwan0",
		"--family", "4", "--method", "tcp-connect", "--count", "3", "--spacing", "250ms", "--rate", "50", "--max-bytes", "wwan0=50MB",
		"--dns", "wwan0=198.18.2.1", "-o", "survey.jsonl", "--no-upload")
	require.NoError(t, err)
	assert.Equal(t, 500, o.Top)
	assert.Equal(t, "top-1m.csv.zip", o.List)
	assert.Equal(t, []string{"wlan0", "wwan0"}, o.Paths)
	assert.Equal(t, "4", o.Family)
	assert.Equal(t, "tcp-connect", o.Method)
	assert.Equal(t, 3, o.Count)
	assert.Equal(t, 250*time.Millisecond, o.Spacing)
	assert.Equal(t, 50.0, o.Rate)
	assert.Equal(t, []string{"wwan0=50MB"}, o.MaxBytes)
	assert.Equal(t, []string{"wwan0=198.18.2.1"}, o.DNS)
	assert.Equal(t, "survey.jsonl", o.Out)
	assert.True(t, o.NoUpload)
	require.NotNil(t, o.changed, "flags given are told from defaults (the config fills the rest)")
	assert.True(t, o.changed("rate"))
	assert.False(t, o.changed("timeout"))

	o, err = cmdutil.RunSeam(NewCmdSurvey, cmdutil.TestFactory())
	require.NoError(t, err)
	assert.Equal(t, 10000, o.Top)
	assert.Equal(t, "-", o.Out)
	_, err = cmdutil.RunSeam(NewCmdSurvey, cmdutil.TestFactory(), "extra")
	assert.Error(t, err, "survey takes no arguments")
}
