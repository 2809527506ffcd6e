// Package shared holds what the lab subcommands share: the flags that
// name a lab (--name, --dir) and shape one (world, paths, timeline), the
// mapping of lab errors to exit codes, and the in-lab test server.
package shared

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/emu"
	"github.com/mptester/mptester/lab/world"
)

// Where names a lab: --name and --dir, shared by every subcommand.
type Where struct {
	Name string
	Dir  string
}

// Flags adds --name and --dir.
func (w *Where) Flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&w.Name, "name", "default", "lab `name` (namespaces mpt-NAME-c and mpt-NAME-i)")
	cmd.Flags().StringVar(&w.Dir, "dir", "", "state `directory` (default /run/mptester/lab/NAME)")
}

// Resolve checks the name and makes the directory absolute (default
// under /run/mptester/lab).
func (w *Where) Resolve() error {
	if err := lab.ValidName(w.Name); err != nil {
		return cmdutil.FlagErrorf("%v", err)
	}
	if w.Dir == "" {
		w.Dir = lab.DefaultDir(w.Name)
	}
	abs, err := filepath.Abs(w.Dir)
	if err != nil {
		return cmdutil.FlagErrorf("--dir: %v", err)
	}
	w.Dir = abs
	return nil
}

// BuildOptions are the flags that shape a lab (up, daemon, run, demo).
type BuildOptions struct {
	WorldSeed  int64
	Domains    int
	WorldFile  string
	CellBackup bool
	Timeline   string
	WLAN       string
	WWAN       string
	Shares     []string
}

// Flags adds the flags that shape a lab.
func (b *BuildOptions) Flags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.Int64Var(&b.WorldSeed, "world-seed", 1, "`seed` of the generated synthetic Internet")
	fl.IntVar(&b.Domains, "domains", 200, "number of domains of the generated world")
	fl.StringVar(&b.WorldFile, "world", "", "load the world from `file` (world.json) instead of generating it, or a named world: "+strings.Join(lab.WorldPresetNames(), ", ")+" (IPv6-only cellular behind NAT64/DNS64, Wi-Fi with IPv6 black-holed towards some hosts)")
	fl.StringSliceVar(&b.Shares, "world-share", nil, "generated world's `CATEGORY=FRACTION`s, e.g. differ=0.4,timeout=0.02,dead=0.05 (keys as in world.json's shares)")
	fl.BoolVar(&b.CellBackup, "cell-backup", false, "mark the wwan0 MPTCP endpoint backup (used only when wlan0 fails)")
	fl.StringVar(&b.Timeline, "timeline", "", "apply a scripted timeline `file` of path changes (emulator settings and impairments, e.g. t=5s wlan0 block=udp/443), or a named scenario: "+strings.Join(lab.ScenarioNames(), ", "))
	fl.StringVar(&b.WLAN, "wlan0", "", "initial wlan0 `settings`, e.g. 'delay=10ms jitter=1ms loss=1% rate=50mbit', and impairments (block=udp/443 strip=mptcp v6=blackhole pmtu=1280,icmp=drop; see lab set) (default: the world's base delay, 10ms; a delay set here becomes the base delay in truth.json)")
	fl.StringVar(&b.WWAN, "wwan0", "", "initial wwan0 `settings` (default: the world's base delay, 30ms)")
}

// Args renders the flags back for the daemon's command line.
func (b *BuildOptions) Args() []string {
	a := []string{fmt.Sprintf("--world-seed=%d", b.WorldSeed), fmt.Sprintf("--domains=%d", b.Domains)}
	if b.WorldFile != "" {
		a = append(a, "--world="+b.WorldFile)
	}
	if b.CellBackup {
		a = append(a, "--cell-backup")
	}
	if b.Timeline != "" {
		a = append(a, "--timeline="+b.Timeline)
	}
	if len(b.Shares) > 0 {
		a = append(a, "--world-share="+strings.Join(b.Shares, ","))
	}
	if b.WLAN != "" {
		a = append(a, "--wlan0="+b.WLAN)
	}
	if b.WWAN != "" {
		a = append(a, "--wwan0="+b.WWAN)
	}
	return a
}

// LabOptions validates the flags into lab.Options.
func (b *BuildOptions) LabOptions(w Where) (lab.Options, error) {
	o := lab.Options{Name: w.Name, Dir: w.Dir, WorldSeed: b.WorldSeed, Domains: b.Domains,
		CellBackup: b.CellBackup, Seed: b.WorldSeed, Params: map[string]emu.Change{}}
	if b.Domains < 0 {
		return o, cmdutil.FlagErrorf("--domains must be >= 0, got %d", b.Domains)
	}
	preset := ""
	if _, ok := lab.WorldPresets[b.WorldFile]; ok && !fileExists(b.WorldFile) {
		preset, b.WorldFile = b.WorldFile, "" // a named world, not a file
		defer func() { b.WorldFile = preset }()
	}
	if b.WorldFile != "" {
		abs, err := filepath.Abs(b.WorldFile)
		if err != nil {
			return o, cmdutil.FlagErrorf("--world: %v", err)
		}
		if _, err := os.Stat(abs); err != nil {
			return o, cmdutil.FlagErrorf("--world: %v", err)
		}
		b.WorldFile, o.WorldFile = abs, abs
	}
	if len(b.Shares) > 0 {
		sh, err := world.ParseShares(strings.Join(b.Shares, ","))
		if err != nil {
			return o, cmdutil.FlagErrorf("--world-share: %v", err)
		}
		o.WorldShares = &sh
	}
	for _, p := range []struct{ name, val string }{{"wlan0", b.WLAN}, {"wwan0", b.WWAN}} {
		if strings.TrimSpace(p.val) == "" {
			continue
		}
		c, ic, err := lab.ParseSettings(strings.Fields(p.val))
		if err == nil {
			_, err = lab.Impair{}.Apply(ic)
		}
		if err != nil {
			return o, cmdutil.FlagErrorf("--%s: %v", p.name, err)
		}
		o.Params[p.name] = c
		if !ic.IsZero() {
			if o.Impair == nil {
				o.Impair = map[string]lab.ImpairChange{}
			}
			o.Impair[p.name] = ic
		}
	}
	if sc, ev, err := lab.GetScenario(b.Timeline); err == nil && !fileExists(b.Timeline) {
		o.Timeline, o.Scenario, o.KernelLink = ev, sc.Name, sc.KernelLink
	} else if b.Timeline != "" {
		abs, err := filepath.Abs(b.Timeline)
		if err != nil {
			return o, cmdutil.FlagErrorf("--timeline: %v", err)
		}
		f, err := os.Open(abs)
		if err != nil {
			return o, cmdutil.FlagErrorf("--timeline: %v", err)
		}
		defer f.Close()
		ev, err := lab.ParseTimeline(f)
		if err != nil {
			return o, cmdutil.FlagErrorf("--timeline %s: %v", b.Timeline, err)
		}
		for _, e := range ev {
			if _, ok := lab.Plan(e.Path); !ok {
				return o, cmdutil.FlagErrorf("--timeline %s: unknown path %q (want wlan0 or wwan0)", b.Timeline, e.Path)
			}
		}
		b.Timeline, o.Timeline = abs, ev
	}
	if preset != "" {
		lab.ApplyWorldPreset(preset, &o)
		if _, err := (lab.Impair{}).Apply(o.Impair["wwan0"]); err != nil {
			return o, cmdutil.FlagErrorf("--world %s: --wwan0: %v", preset, err)
		}
	}
	return o, nil
}

func fileExists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

// MapErr gives lab errors their exit codes.
func MapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, lab.ErrPermission):
		return fmt.Errorf("%w: %w", cmdutil.ErrPermission, err)
	case errors.Is(err, lab.ErrNoSuchPath):
		return fmt.Errorf("%w: %w", cmdutil.ErrUsage, err)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("%w: %w", cmdutil.ErrCancelled, err)
	}
	return err
}

// NoServeFlag adds --no-serve (up, daemon, run).
func NoServeFlag(cmd *cobra.Command, p *bool) {
	cmd.Flags().BoolVar(p, "no-serve", false, "do not start the test server on the lab's server addresses")
}
