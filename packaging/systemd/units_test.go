// Package systemd holds the units the .deb/.rpm ship; its test measures
// their exposure.
package systemd

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/mptester/mptester/internal/nstest"
)

// maxExposure is systemd-analyze's "OK" bound (4.0 and below; MEDIUM
// above): every shipped service stays within it.
const maxExposure = 4.0

var ignoredRE = regexp.MustCompile(`(?m)^.*(Unknown |[Ff]ailed to parse|[Ii]nvalid ).*ignoring.*$`)

var exposureRE = regexp.MustCompile(`Overall exposure level for (\S+): (\d+\.\d+) (\S+)`)

// TestUnitExposure scores every shipped service with `systemd-analyze
// security --offline=yes` (Debian: the systemd package) and fails above
// maxExposure. scripts/test runs it verbosely, printing the scores.
func TestUnitExposure(t *testing.T) {
	bin, err := exec.LookPath("systemd-analyze")
	if err != nil {
		nstest.SkipUnless(t, "systemd-analyze not found: apt-get install systemd")
		return
	}
	units, err := filepath.Glob("*.service")
	if err != nil || len(units) < 3 {
		t.Fatalf("want the agent, serve and collect services here, found %v (%v)", units, err)
	}
	for _, u := range units {
		// --offline reads the file as is; the exposure is printed last.
		out, err := exec.Command(bin, "security", "--offline=yes", "--no-pager", u).CombinedOutput()
		m := exposureRE.FindSubmatch(out)
		if m == nil {
			t.Errorf("%s: no exposure level in the output (%v):\n%s", u, err, out)
			continue
		}
		// A directive systemd cannot read is ignored, and the score
		// with it: a typo would pass unseen.
		for _, l := range ignoredRE.FindAll(out, -1) {
			t.Errorf("%s: %s", u, l)
		}
		score, _ := strconv.ParseFloat(string(m[2]), 64)
		t.Logf("%-26s exposure %.1f %s", u, score, m[3])
		if score > maxExposure {
			t.Errorf("%s: exposure %.1f %s, want at most %.1f (OK): tighten the unit (systemd-analyze security --offline=yes %s)", u, score, m[3], maxExposure, u)
		}
	}
}
