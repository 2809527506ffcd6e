// Package lab implements `mptester lab ...`: a multihomed testbed in
// network namespaces (package lab) driven from the command line. It wires
// the subcommand groups: up (up, daemon), ctl (down, status, set,
// scenario, exec, run), demo, sweep (sweep, sweep-worker); shared holds
// the flags and helpers they have in common.
package lab

import (
	"github.com/spf13/cobra"

	"github.com/mptester/mptester/internal/cmd/lab/ctl"
	"github.com/mptester/mptester/internal/cmd/lab/demo"
	"github.com/mptester/mptester/internal/cmd/lab/sweep"
	"github.com/mptester/mptester/internal/cmd/lab/up"
	"github.com/mptester/mptester/internal/cmdutil"
)

// NewCmdLab builds the `lab` command group.
func NewCmdLab(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lab <command>",
		Short: "Run a multihomed testbed with emulated Wi-Fi and cellular paths (Linux, root)",
		Long: `The lab builds two network namespaces: a client with interfaces wlan0
and wwan0 (IPv4 and IPv6, a default route each, wlan0 preferred, source
policy routing, MPTCP endpoints) and an "Internet" with per-path DNS
resolvers, test servers and AnyIP target prefixes, generated from a seed
with a known ground truth (truth.json). Each path is emulated in
userspace: delay, jitter, loss, rate, changeable at run time.

Addresses come only from 198.18.0.0/15 and fd00::/8.`,
		Example: `  sudo mptester lab up --name demo --wlan0 'delay=10ms' --wwan0 'delay=40ms loss=1%'
  sudo mptester lab exec --name demo -- mptester ifaces
  sudo mptester lab set --name demo wlan0 delay=200ms loss=30%
  sudo mptester lab set --name demo wlan0 down
  sudo mptester lab down --name demo
  sudo mptester lab run -- ping -c 3 -I wwan0 198.19.0.1
  sudo mptester lab demo
  sudo mptester lab sweep --preset 004-rtt --quick -o rtt.jsonl --csv rtt.csv`,
	}
	cmd.AddCommand(up.NewCmdUp(f, nil))
	cmd.AddCommand(up.NewCmdDaemon(f, nil))
	cmd.AddCommand(ctl.NewCmdDown(f, nil))
	cmd.AddCommand(ctl.NewCmdStatus(f, nil))
	cmd.AddCommand(ctl.NewCmdSet(f, nil))
	cmd.AddCommand(ctl.NewCmdScenario(f, nil))
	cmd.AddCommand(ctl.NewCmdExec(f, nil))
	cmd.AddCommand(ctl.NewCmdRun(f, nil))
	cmd.AddCommand(demo.NewCmdDemo(f, nil))
	cmd.AddCommand(sweep.NewCmdSweep(f, nil))
	cmd.AddCommand(sweep.NewCmdSweepWorker(f, nil))
	return cmd
}
