package upload

import (
	"os/exec"
	"strings"
	"testing"
)

// TestUploadCarriesNoTransport: the uploader checks its pin with
// internal/certs and pulls in no measuring transport (quic-go, mpquic,
// mphttp, patterns), so a probe's upload path stays small.
func TestUploadCarriesNoTransport(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.Contains(p, "quic") || strings.HasSuffix(p, "/mphttp") || strings.Contains(p, "/mptester/patterns") {
			t.Errorf("upload depends on %s", p)
		}
	}
}
