package report

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOldFilesStillRead: results written under schema 1.0 (the golden
// files as they were, and a run document of the 1.0 binary with tcp, mptcp
// and quic records) validate and decode under this version.
func TestOldFilesStillRead(t *testing.T) {
	for _, name := range []string{"document.json", "run.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", "v1.0", name))
		require.NoError(t, err)
		require.NoError(t, ValidateDocument(b), name)
		var d Document
		require.NoError(t, json.Unmarshal(b, &d), name)
		assert.Equal(t, "1.0", d.SchemaVersion, name)
		require.NotEmpty(t, d.Paths, name)
		assert.NotEmpty(t, d.Paths[0].Name, name)
		assert.NotEmpty(t, d.Records, name)
	}
	b, err := os.ReadFile(filepath.Join("testdata", "v1.0", "stream.jsonl"))
	require.NoError(t, err)
	require.NoError(t, ValidateStream(bytes.NewReader(b)))
}

// TestReportTreeImportsNoCollect: collect -> report runs one way only; no
// package under report depends on collect (the store as a report input
// lives in collect/storeinput).
func TestReportTreeImportsNoCollect(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	mod, err := exec.Command(goBin, "list", "-m").Output()
	require.NoError(t, err)
	collect := strings.TrimSpace(string(mod)) + "/collect"
	out, err := exec.Command(goBin, "list", "-deps", "-test", "-f", "{{.ImportPath}}", "./...").Output()
	require.NoError(t, err)
	for _, p := range strings.Fields(string(out)) {
		if p == collect || strings.HasPrefix(p, collect+"/") {
			t.Errorf("a package under report depends on %s", p)
		}
	}
}
