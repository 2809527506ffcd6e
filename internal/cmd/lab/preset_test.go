package lab_test

import (
	"slices"
	"testing"

	"github.com/mptester/mptester/internal/cmd/lab/shared"
	"github.com/mptester/mptester/lab"
)

// --world mobile-v6only names a preset, not a file: wwan0 nat64 and the
// world's IPv6 block share on wlan0; the daemon's arguments keep the name.
func TestWorldPresetFlag(t *testing.T) {
	b := shared.BuildOptions{WorldFile: "mobile-v6only"}
	o, err := b.LabOptions(shared.Where{Name: "x", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if c := o.Impair["wwan0"]; c.NAT64 == nil || !*c.NAT64 || o.WorldFile != "" || o.WorldShares == nil || o.WorldShares.FirstPathV6Block != lab.MobileV6Block {
		t.Errorf("options %+v: want wwan0 nat64, no world file, first_path_v6_block %v", o, lab.MobileV6Block)
	}
	if !slices.Contains(b.Args(), "--world=mobile-v6only") {
		t.Errorf("daemon args %q lack --world=mobile-v6only", b.Args())
	}
	both := shared.BuildOptions{WorldFile: "mobile-v6only", WWAN: "cgnat"}
	o, err = both.LabOptions(shared.Where{Name: "x", Dir: t.TempDir()})
	if c := o.Impair["wwan0"]; err != nil || c.NAT64 == nil || !*c.NAT64 || c.CGNAT == nil || !*c.CGNAT {
		t.Errorf("mobile-v6only with --wwan0 cgnat: %+v, %v; want nat64 and cgnat on wwan0", c, err)
	}
}
