//go:build linux && !race

package lab_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/labtest"
)

// TestLabSweepImpair: a sweep file's impairments are planted per cell and
// cleared by the next: MPTCP with wlan0 primary gets no subflow on path 2
// while wwan0 strips MPTCP options (the MP_JOIN loses its option), then
// a subflow carrying data on the clean cell after it (rules removed).
func TestLabSweepImpair(t *testing.T) {
	labtest.Require(t)
	t.Setenv(envMain, "1")
	dir := shortDir(t)
	spec := filepath.Join(dir, "impair.yaml")
	if err := os.WriteFile(spec, []byte(`name: impair
paths:
  wlan0: {rtt: [20ms]}
  wwan0: {rtt: [20ms], impair: ['strip=mptcp', '']}
sizes: [512KiB]
transports: [mptcp]
primaries: [wlan0]
repetitions: 2
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "impair.jsonl")
	name := uniqueName()
	t.Cleanup(func() { _ = lab.CleanStale(t.Context(), name, filepath.Join(dir, "lab-imp")) })
	code, stdout, stderr := run(t, "lab", "sweep", "--file", spec, "--name", name, "--dir", filepath.Join(dir, "lab-imp"), "-o", out, "--log-level", "warn")
	t.Logf("%s", stdout)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	runs, cells := readSweep(t, out)
	if len(runs) != 4 || len(cells) != 2 {
		t.Fatalf("%d runs, %d cells; want 4, 2", len(runs), len(cells))
	}
	for _, r := range runs {
		imp := r.Paths[1].Impair
		if r.Status != "success" || r.MPTCPNegotiated == nil || !*r.MPTCPNegotiated {
			t.Errorf("cell %d rep %d (wwan0 %q): status %s, negotiated %v", r.Index, r.Rep, imp, r.Status, r.MPTCPNegotiated)
			continue
		}
		var emu2 uint64
		for _, pb := range r.PathBytes {
			if pb.Path == "wwan0" {
				emu2 = pb.EmuBytes
			}
		}
		switch imp {
		case "":
			if r.Subflows < 2 || emu2 < 64<<10 {
				t.Errorf("clean wwan0, rep %d: %d subflows, %d emulator bytes on wwan0; want its subflow to carry data", r.Rep, r.Subflows, emu2)
			}
		case "strip=mptcp":
			// The MP_JOIN SYN loses its option: the kernel still counts
			// the attempted subflow, but it never carries data.
			if emu2 > 16<<10 {
				t.Errorf("stripped wwan0, rep %d: %d emulator bytes on wwan0; want no data", r.Rep, emu2)
			}
		default:
			t.Errorf("impair %q recorded, want '' or strip=mptcp", imp)
		}
	}
}
