package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGenerate: a page per command (survey's names its flags), the three
// completions, and the same bytes on a second run (reproducible packages).
func TestGenerate(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	a, b := t.TempDir(), t.TempDir()
	require.NoError(t, generate(a))
	require.NoError(t, generate(b))
	zr, err := os.Open(filepath.Join(a, "man", "mptester-survey.1.gz"))
	require.NoError(t, err)
	defer zr.Close()
	r, err := gzip.NewReader(zr)
	require.NoError(t, err)
	page, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.Contains(t, string(page), `.TH "MPTESTER" "1"`)
	assert.Contains(t, string(page), `\fB--method\fP`)
	for _, f := range []string{"man/mptester.1.gz", "man/mptester-agent.1.gz", "man/mptester-serve.1.gz", "man/mptester-collect.1.gz",
		"completions/mptester.bash", "completions/_mptester", "completions/mptester.fish"} {
		x, err := os.ReadFile(filepath.Join(a, f))
		require.NoError(t, err, f)
		y, err := os.ReadFile(filepath.Join(b, f))
		require.NoError(t, err, f)
		assert.NotEmpty(t, x, f)
		assert.True(t, bytes.Equal(x, y), "%s differs between two runs", f)
	}
}
