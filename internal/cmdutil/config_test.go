package cmdutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A bad pin in the upload section is refused when the file loads, by
// FILE:LINE and key, before any upload setting is built. (Before the
// checks were passed in, a binary without the run command, as upload's own
// tests, loaded it and only SettingsFrom refused it, without a line.)
func TestLoadConfigUploadPin(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(token, []byte(strings.Repeat("ab", 32)+"\n"), 0o600))
	path := filepath.Join(dir, "c.yaml")
	require.NoError(t, os.WriteFile(path, []byte("probe_id: p\nupload:\n  url: https://198.18.0.1:8443\n  token_file: "+token+"\n  pin: sha256:12\n"), 0o600))
	_, err := LoadConfig(path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), path+`:5: upload.pin: invalid SHA-256 pin "sha256:12"`)

	pin := strings.Repeat("0f", 32)
	require.NoError(t, os.WriteFile(path, []byte("probe_id: p\nupload:\n  url: https://198.18.0.1:8443\n  token_file: "+token+"\n  pin: "+pin+"\n"), 0o600))
	cfg, err := LoadConfig(path)
	require.NoError(t, err)
	f := &Factory{Config: cfg, ConfigPath: path}
	set, err := f.UploadSettings()
	require.NoError(t, err)
	require.NotNil(t, set.Pin)
	assert.Equal(t, byte(0x0f), set.Pin[31])
}

// Every name a config holds gets its owner's check (none left nil).
func TestConfigChecksComplete(t *testing.T) {
	_, err := ParseConfig([]byte("survey:\n  method: no-such-method\nserve:\n  ports: {tcp: [443]}\nrun:\n  transports: [mphttp]\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `config line 2: survey.method: unknown method "no-such-method"`)
}
