package config

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOnlyCommandsImportConfig: the config file is the command layer's
// input; a library that reads it (as lab and upload once did) validates
// only what some command happened to set up. Libraries take typed values
// (upload.Config, lab.Info) and own their checks instead.
func TestOnlyCommandsImportConfig(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	list := exec.Command(goBin, "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}} {{join .TestImports \" \"}} {{join .XTestImports \" \"}}", "./...")
	list.Dir = "../.."
	out, err := list.Output()
	require.NoError(t, err)
	mod, err := exec.Command(goBin, "list", "-m").Output()
	require.NoError(t, err)
	root := strings.TrimSpace(string(mod)) + "/"
	self := root + "internal/config"
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		rel := strings.TrimPrefix(f[0], root)
		if rel == "internal/config" || strings.HasPrefix(rel, "internal/cmd/") || rel == "internal/cmd" ||
			rel == "internal/cmdutil" || rel == "cmd" || strings.HasPrefix(rel, "cmd/") {
			continue
		}
		for _, imp := range f[1:] {
			if imp == self {
				t.Errorf("%s imports internal/config (a library: take the typed values from the command layer)", f[0])
			}
		}
	}
}
