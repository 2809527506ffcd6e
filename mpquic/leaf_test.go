package mpquic

import (
	"os/exec"
	"strings"
	"testing"
)

// The package stands alone (issue 12): its non-test dependencies are the
// standard library and golang.org/x/crypto (which brings x/sys/cpu),
// nothing of mptester but its own layers (mpquic/internal/...).
func TestMPQUICIsALeaf(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list found not even the package itself")
	}
	for _, p := range deps {
		if strings.HasSuffix(p, "/mpquic") || strings.Contains(p, "/mpquic/internal/") || strings.HasPrefix(p, "golang.org/x/crypto/") || strings.HasPrefix(p, "golang.org/x/sys/") {
			continue
		}
		t.Errorf("mpquic depends on %s", p)
	}
}
