// Package root assembles the mptester command tree.
package root

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	agentcmd "github.com/mptester/mptester/internal/cmd/agent"
	analyzecmd "github.com/mptester/mptester/internal/cmd/analyze"
	collectcmd "github.com/mptester/mptester/internal/cmd/collect"
	"github.com/mptester/mptester/internal/cmd/doctor"
	fetchcmd "github.com/mptester/mptester/internal/cmd/fetch"
	"github.com/mptester/mptester/internal/cmd/ifaces"
	labcmd "github.com/mptester/mptester/internal/cmd/lab"
	reportcmd "github.com/mptester/mptester/internal/cmd/report"
	runcmd "github.com/mptester/mptester/internal/cmd/run"
	servecmd "github.com/mptester/mptester/internal/cmd/serve"
	surveycmd "github.com/mptester/mptester/internal/cmd/survey"
	uploadcmd "github.com/mptester/mptester/internal/cmd/upload"
	versioncmd "github.com/mptester/mptester/internal/cmd/version"
	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/internal/config"
)

// NewCmdRoot builds the tree. Global flags are parsed before any command
// runs, and the factory is completed then (logger level, config file).
func NewCmdRoot(f *cmdutil.Factory) *cobra.Command {
	var logLevel, configPath string
	cmd := &cobra.Command{
		Use:   "mptester",
		Short: "Measure what each interface of a multihomed host can reach",
		Long: `mptester probes every network path of a multihomed host: per-interface
DNS, RTT and reachability surveys (WW/WL/LW/LL), and TCP, MPTCP and QUIC
traffic patterns against mptester test servers.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			// MPTESTER_CONFIG names a config file when --config is absent
			// (lab exec sets it, exactly as a user's file would be used).
			if configPath == "" {
				configPath = os.Getenv("MPTESTER_CONFIG")
			}
			if configPath != "" {
				cfg, err := cmdutil.LoadConfig(configPath)
				if err != nil {
					return cmdutil.Usage(err)
				}
				f.Config, f.ConfigPath = cfg, configPath
				if !cmd.Flags().Changed("log-level") && cfg.LogLevel != "" {
					logLevel = cfg.LogLevel
				}
			}
			lvl, err := parseLevel(logLevel)
			if err != nil {
				return err
			}
			f.Logger = slog.New(slog.NewTextHandler(f.IO.ErrOut, &slog.HandlerOptions{Level: lvl}))
			return nil
		},
	}
	cmd.PersistentFlags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error (logs go to stderr)")
	cmd.PersistentFlags().StringVar(&configPath, "config", "", "strict YAML config `file` (unknown keys are an error; flags override it; default $MPTESTER_CONFIG)")
	cmd.SetOut(f.IO.Out)
	cmd.SetErr(f.IO.ErrOut)
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w: %w", cmdutil.ErrUsage, err)
	})

	cmd.AddCommand(versioncmd.NewCmdVersion(f, nil))
	cmd.AddCommand(ifaces.NewCmdIfaces(f, nil))
	cmd.AddCommand(doctor.NewCmdDoctor(f, nil))
	cmd.AddCommand(labcmd.NewCmdLab(f))
	cmd.AddCommand(surveycmd.NewCmdSurvey(f, nil))
	cmd.AddCommand(servecmd.NewCmdServe(f, nil))
	cmd.AddCommand(runcmd.NewCmdRun(f, nil))
	cmd.AddCommand(fetchcmd.NewCmdFetch(f, nil))
	cmd.AddCommand(collectcmd.NewCmdCollect(f, nil))
	cmd.AddCommand(uploadcmd.NewCmdUpload(f, nil))
	cmd.AddCommand(agentcmd.NewCmdAgent(f, nil))
	cmd.AddCommand(reportcmd.NewCmdReport(f, nil))
	cmd.AddCommand(analyzecmd.NewCmdAnalyze(f, nil))
	// cobra's built-in `completion` command (bash, zsh, fish, powershell).
	cmd.CompletionOptions.DisableDefaultCmd = false
	cmd.InitDefaultCompletionCmd()
	strictGroups(cmd)
	return cmd
}

// strictGroups makes an unknown subcommand of a command group (lab,
// completion) a usage error; cobra would print help and exit 0.
func strictGroups(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		if c.HasSubCommands() && !c.Runnable() {
			c.Args = cobra.NoArgs
			c.RunE = func(c *cobra.Command, args []string) error { return c.Help() }
		}
		strictGroups(c)
	}
}

func parseLevel(s string) (slog.Level, error) {
	l, err := config.LogLevel(s)
	if err != nil {
		return 0, cmdutil.FlagErrorf("--log-level: %v", err)
	}
	return l, nil
}
