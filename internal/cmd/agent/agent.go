// Package agent implements `mptester agent`: run the fleet schedule.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/agent"
	"github.com/mptester/mptester/agent/caps"
	"github.com/mptester/mptester/collect/api"
	"github.com/mptester/mptester/internal/bogon"
	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/internal/config"
	"github.com/mptester/mptester/upload"
)

// Options for `mptester agent`.
type Options struct {
	IO     *cmdutil.IOStreams
	Logger *slog.Logger
	F      *cmdutil.Factory

	Once  bool
	State string
	Poll  time.Duration
	// Textfile is node_exporter's textfile directory (--textfile, or the
	// config's agent.textfile).
	Textfile string
}

// NewCmdAgent builds the command; runF replaces agentRun in tests.
func NewCmdAgent(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, F: f}
	cmd := &cobra.Command{
		Use:   "agent [--once]",
		Short: "Run this probe's fleet schedule from the collect server",
		Long: `Fetch this probe's schedule from the collect server (the config's upload:
section names it; If-None-Match with the last ETag, and the last good copy
is used while the server is unreachable), run every measurement that is
due, one at a time, each at its interval plus a uniform random spread and
inside its time windows, then upload the spool. A changed schedule is
logged with its revision.

Tasks are typed measurement definitions (GET /v1/schedule.schema.json);
the agent checks each one again, the cached copy included, against the
schema and the caps of the config's agent: section (max_rate,
max_duration, measurements, allow_private_targets, paths, budget,
schedule_key), builds the command line itself and sends results only to
the spool. A refused or budget-skipped task is logged and reported to the
collector with the next upload.

--once runs what is due and exits (cron, or the systemd timer shipped in
the packages); without it the agent keeps running.

--textfile DIR (or agent.textfile in the config) writes this probe's
figures to DIR/mptester.prom after every pass, atomically, for
node_exporter's textfile collector: the figures the collector serves on
/metrics/fleet, from this probe's last survey, pattern run and mobile run
(kept in the state directory), its spool backlog and the pass's time.`,
		Example: `  mptester agent --once --config /etc/mptester/mptester.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Logger = f.Logger
			return cmdutil.Dispatch(cmd.Context(), opts, runF, agentRun)
		},
	}
	cmd.Flags().BoolVar(&opts.Once, "once", false, "run what is due, upload, and exit")
	cmd.Flags().StringVar(&opts.State, "state", "", "`directory` for the cached schedule and task state (default: next to the spool)")
	cmd.Flags().DurationVar(&opts.Poll, "poll", 5*time.Minute, "without --once: how often to look for a new schedule")
	cmd.Flags().StringVar(&opts.Textfile, "textfile", "", "write this probe's figures for Prometheus to `DIR`/"+TextfileName+" (node_exporter's textfile collector directory)")
	return cmd
}

func agentRun(ctx context.Context, opts *Options) error {
	set, err := opts.F.UploadSettings()
	if err != nil {
		return err
	}
	if opts.Poll <= 0 {
		return cmdutil.FlagErrorf("--poll must be positive")
	}
	if opts.Textfile == "" && opts.F.Config != nil {
		opts.Textfile = opts.F.Config.Agent.Textfile
	}
	if opts.Textfile != "" {
		if st, err := os.Stat(opts.Textfile); err != nil || !st.IsDir() {
			return cmdutil.FlagErrorf("--textfile: %s is not a directory", opts.Textfile)
		}
	}
	if opts.State == "" {
		opts.State = filepath.Join(filepath.Dir(set.SpoolDir), filepath.Base(set.SpoolDir)+"-agent")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	sp, err := upload.OpenSpool(set.SpoolDir, set.Quota)
	if err != nil {
		return err
	}
	cp, err := Caps(opts.F.Config)
	if err != nil {
		return err
	}
	var tf *textfile
	if opts.Textfile != "" {
		tf = &textfile{dir: opts.Textfile, state: filepath.Join(opts.State, "figures.json"), probe: opts.F.ProbeID()}
		if err := os.MkdirAll(opts.State, 0o700); err != nil {
			return err
		}
	}
	a := &agent.Agent{URL: set.URL, Token: set.Token, Probe: opts.F.ProbeID(), Dir: opts.State, Logger: opts.Logger,
		HTTP: &http.Client{Transport: upload.Transport(set.Pin, nil), Timeout: time.Minute},
		Caps: cp, Spool: sp, Local: localPrefixes, UploadPath: set.Path,
		Exec: func(ctx context.Context, t api.Task, args []string) error {
			// The owner's config (its dns:, upload:, survey: defaults) is
			// the only file named that the task did not come with.
			if opts.F.ConfigPath != "" {
				args = append([]string{"--config", opts.F.ConfigPath}, args...)
			}
			cmd := exec.CommandContext(ctx, self, args...)
			inGroup(cmd, cutGrace)
			cmd.Stdout = io.Discard // the result is in the spool
			cmd.Stderr = opts.IO.ErrOut
			var before map[string]bool
			if tf != nil {
				before = pending(sp)
			}
			err := cmd.Run()
			if tf != nil {
				if terr := tf.add(sp, before); terr != nil {
					opts.Logger.Warn("textfile: figures of the result not kept", "err", terr)
				}
			}
			var ee *exec.ExitError
			if errors.As(err, &ee) && (ee.ExitCode() == cmdutil.ExitPartial || ee.ExitCode() == cmdutil.ExitInvalid) {
				return nil // measured; the result says what went wrong
			}
			return err
		},
		Upload: func(ctx context.Context, p api.UploadPolicy) error {
			s := set
			if p.Path != "" {
				s.Path = p.Path
			}
			return opts.F.Upload(ctx, s, sp)
		},
	}
	for {
		ran, err := a.RunOnce(ctx)
		if tf != nil {
			if terr := tf.write(sp, time.Now()); terr != nil {
				opts.Logger.Warn("textfile not written", "dir", opts.Textfile, "err", terr)
			}
		}
		switch {
		case errors.Is(err, agent.ErrBusy):
			opts.Logger.Info("another agent is measuring; leaving it to that one")
			return nil
		case err != nil && opts.Once:
			return err
		case err != nil:
			opts.Logger.Warn("agent", "err", err)
		}
		if opts.Once {
			fmt.Fprintf(opts.IO.ErrOut, "agent: ran %d tasks\n", len(ran))
			return nil
		}
		wait := opts.Poll
		if next := a.NextDue(); !next.IsZero() && time.Until(next) < wait {
			wait = max(time.Until(next), time.Second)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// cutGrace is how long a task has, after its max_duration, to flush
// what it measured before its process group is killed.
const cutGrace = 3 * time.Second

// Caps are the owner's caps from the config's agent: section over the
// defaults.
func Caps(c *config.Config) (caps.Caps, error) {
	cp := caps.Defaults()
	if c == nil {
		return cp, nil
	}
	ag := c.Agent
	if ag.MaxRate > 0 {
		cp.MaxRate = ag.MaxRate
	}
	if ag.MaxDuration > 0 {
		cp.MaxDuration = api.Duration(ag.MaxDuration.D())
	}
	if len(ag.Measurements) > 0 {
		cp.Types = ag.Measurements
	}
	cp.AllowPrivate, cp.Paths = ag.AllowPrivateTargets, ag.Paths
	for _, s := range ag.PublicPrefixes {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return caps.Caps{}, cmdutil.FlagErrorf("%s: invalid prefix %q", c.Where("agent.public_prefixes"), s)
		}
		cp.Public = append(cp.Public, p.Masked())
	}
	if ag.ScheduleKey != "" {
		k, err := config.ScheduleKey(ag.ScheduleKey)
		if err != nil {
			return caps.Caps{}, cmdutil.FlagErrorf("%s: %v", c.Where("agent.schedule_key"), err)
		}
		cp.ScheduleKey = k
	}
	for name, size := range ag.Budget {
		n, err := config.ByteSize(size)
		if err != nil {
			return caps.Caps{}, cmdutil.FlagErrorf("%s: %v", c.Where("agent.budget."+name), err)
		}
		if cp.Budget == nil {
			cp.Budget = map[string]int64{}
		}
		cp.Budget[name] = n
	}
	return cp, nil
}

// localPrefixes are the subnets of this host's addresses (a run's server
// there is on the owner's own network); none when they cannot be listed.
func localPrefixes() []netip.Prefix {
	out, _ := bogon.LocalPrefixes()
	return out
}
