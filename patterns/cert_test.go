package patterns

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKeepSelfSigned: the first start makes the certificate (0600), every
// later one loads the same (same fingerprint, names of the first start);
// a damaged file is an error naming it, never silently replaced.
func TestKeepSelfSigned(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cert.pem")
	c1, fp1, created, err := KeepSelfSigned(file, []string{"probe.example", "198.18.0.1"})
	require.NoError(t, err)
	assert.True(t, created)
	st, err := os.Stat(file)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	c2, fp2, created, err := KeepSelfSigned(file, []string{"other.example"})
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, fp1, fp2, "a restart keeps the fingerprint")
	assert.Equal(t, c1.Certificate[0], c2.Certificate[0])
	assert.Equal(t, []string{"localhost", "probe.example"}, c2.Leaf.DNSNames)

	_, fp3, err := SelfSigned(nil)
	require.NoError(t, err)
	assert.NotEqual(t, fp1, fp3)

	require.NoError(t, os.WriteFile(file, []byte("garbage"), 0o600))
	_, _, _, err = KeepSelfSigned(file, nil)
	assert.ErrorContains(t, err, file)
}
