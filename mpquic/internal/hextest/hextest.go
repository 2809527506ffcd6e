// Package hextest reads the hex test vectors of mpquic's tests (RFC 9001
// Appendix A's packets and keys, fuzz seeds): hex with any white space,
// inline or from a file under the test's testdata directory.
package hextest

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Unhex decodes s, ignoring white space; a bad vector fails the test.
func Unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Read decodes testdata/name of the package under test.
func Read(t testing.TB, name string) []byte {
	t.Helper()
	s, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return Unhex(t, string(s))
}
