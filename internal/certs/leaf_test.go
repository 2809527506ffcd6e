package certs

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCertsIsSmall: the package every pin check goes through depends on
// the standard library and internal/fsutil only.
func TestCertsIsSmall(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range strings.Fields(string(out)) {
		if !strings.HasSuffix(p, "/internal/certs") && !strings.HasSuffix(p, "/internal/fsutil") {
			t.Errorf("certs depends on %s", p)
		}
	}
}
