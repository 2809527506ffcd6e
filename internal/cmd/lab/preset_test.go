package lab_test

import (
	"slices"
	"testing"

	"github.com/mptester/mptester/internal/cmd/lab/shared"
	"github.com/mptester/mptester/lab"
)

// --world mobile-v6only names a preset, not a file: wwan0 nat64 behind a
// cgnat, the world's IPv6 block share and UDP 443 blocked towards some
// prefixes on wlan0; the daemon's arguments keep the name.
func TestWorldPresetFlag(t *testing.T) {
	b := shared.BuildOptions{WorldFile: "mobile-v6only"}
	o, err := b.LabOptions(shared.Where{Name: "x", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if c := o.Impair["wwan0"]; c.NAT64 == nil || !*c.NAT64 || c.CGNAT == nil || !*c.CGNAT || o.WorldFile != "" || o.WorldShares == nil || o.WorldShares.FirstPathV6Block != lab.MobileV6Block {
		t.Errorf("options %+v: want wwan0 nat64 and cgnat, no world file, first_path_v6_block %v", o, lab.MobileV6Block)
	}
	w := o.Impair["wlan0"]
	if im, err := (lab.Impair{}).Apply(w); err != nil || len(im.Block) != len(lab.MobileUDPBlocked) || im.Block[0] != (lab.PortRule{Proto: "udp", Port: 443, Prefix: lab.MobileUDPBlocked[0]}) {
		t.Errorf("wlan0 %+v, %v: want UDP 443 blocked towards %v", im, err, lab.MobileUDPBlocked)
	}
	mine := shared.BuildOptions{WorldFile: "mobile-v6only", WLAN: "block=tcp/80"}
	o, err = mine.LabOptions(shared.Where{Name: "x", Dir: t.TempDir()})
	if im, _ := (lab.Impair{}).Apply(o.Impair["wlan0"]); err != nil || len(im.Block) != 1 || im.Block[0].Port != 80 {
		t.Errorf("--wlan0 block=tcp/80 with the preset: %+v, %v; want the user's block kept", im, err)
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
