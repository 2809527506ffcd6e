package upload

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmdutil"
)

func TestNewCmdUploadSeam(t *testing.T) {
	f := cmdutil.TestFactory()
	o, err := cmdutil.RunSeam(NewCmdUpload, f, "--status", "--json")
	require.NoError(t, err)
	assert.True(t, o.Status)
	assert.True(t, o.JSON)
	assert.Same(t, f, o.F)
	_, err = cmdutil.RunSeam(NewCmdUpload, f, "file.json")
	assert.Error(t, err, "upload takes no arguments")
}
