package upload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPinNeedsHTTPS: a pin with a plain http:// URL could never be
// checked; the config is refused, naming both keys.
func TestPinNeedsHTTPS(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tok, []byte(strings.Repeat("ab", 32)), 0o600))
	pin := "sha256:" + strings.Repeat("00", 32)
	_, err := SettingsFrom(&Config{URL: "http://collect.test", TokenFile: tok, Pin: pin})
	assert.ErrorContains(t, err, "upload.pin is set but upload.url")
	_, err = SettingsFrom(&Config{URL: "https://collect.test", TokenFile: tok, Pin: pin})
	assert.NoError(t, err)
}

// TestCollectorText: what a collector says reaches a log or a terminal
// with every non-printable rune escaped (C0, C1 such as CSI, newlines,
// invalid UTF-8), printable text (JSON, accents) as it was, cut at n.
func TestCollectorText(t *testing.T) {
	in := "{\"error\":\"bad\"}\n\x1b[2J\u009b31m\xff\u00e9 \\x"
	assert.Equal(t, `{"error":"bad"}\n\x1b[2J\u009b31m\xffé \\x`, CollectorText([]byte(in), 100))
	assert.Equal(t, "abc...", CollectorText([]byte("abcdef"), 3))
}
