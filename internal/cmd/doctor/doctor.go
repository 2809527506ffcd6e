// Package doctor implements `mptester doctor`.
package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/probe/doctor"
	"github.com/mptester/mptester/report"
)

// Options for `mptester doctor`.
type Options struct {
	IO       *cmdutil.IOStreams
	Discover func(ctx context.Context, dnsFlags []string) ([]probe.Path, error)
	// Checks runs the checks on the discovered paths (doctor.Run).
	Checks  func(ctx context.Context, paths []probe.Path) []doctor.Check
	ProbeID func() string

	DNS  []string
	JSON bool
	// Portal, V6Blackhole: measure each path for a captive portal, an
	// IPv6 black hole (network traffic).
	Portal, V6Blackhole, NAT64 bool
}

// checkRecord is one check in the --json envelope.
type checkRecord struct {
	Type string `json:"type"`
	doctor.Check
}

// RecordType is the envelope record type of a check.
const RecordType = "check"

// NewCmdDoctor builds the command; runF replaces doctorRun in tests.
func NewCmdDoctor(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Discover: f.DiscoverPaths, ProbeID: f.ProbeID}
	opts.Checks = func(ctx context.Context, paths []probe.Path) []doctor.Check {
		env := doctor.Env{Paths: paths}
		if opts.Portal {
			env.Portal = func(ctx context.Context, p probe.Path) string { return probe.DetectPortal(ctx, p, time.Second) }
		}
		if opts.NAT64 {
			env.NAT64 = func(ctx context.Context, p probe.Path) string {
				d := probe.DiscoverNAT64Paths(ctx, []probe.Path{p}, time.Second)[p.Name]
				if len(d.Prefixes) == 0 {
					return ""
				}
				return d.Prefixes[0].String()
			}
		}
		if opts.V6Blackhole {
			env.V6Blackhole = func(ctx context.Context, p probe.Path) string { return probe.DetectV6Blackhole(ctx, p, time.Second) }
		}
		return doctor.Run(ctx, env)
	}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check this host is set up for multipath measurement, with the command that fixes each problem",
		Long: `Check privileges, MPTCP (enabled, limits, a subflow endpoint per
non-primary path), reverse-path filtering, per-path policy routing for
address-bound traffic, per-path DNS, and the UDP buffer limit QUIC needs.
On macOS: privileges, per-path DNS, the macOS version, Network.framework
(which carries MPTCP there), whether it lists each interface, and what
aggregate mode needs.

With --portal it also measures each path for a captive portal (two DNS
queries for names under .invalid per path, one plain HTTP request when
both resolve) and fails naming it: measurements there reach the portal.
With --nat64 it asks each path's DNS for its NAT64 prefix (RFC 7050) and
names it, or warns on an IPv6-only path without one. With --v6-blackhole
it asks each path's IPv4 and IPv6 resolvers one query
each and warns where only the IPv4 ones answer: IPv6 there is black-holed.

Each problem comes with the exact command that fixes it. The primary path
is the one with the lowest-metric default route; every other path with a
global address and a default route is a non-primary path.

Exit status 7 when a check fails; warnings exit 0.`,
		Example: `  mptester doctor
  mptester doctor --json
  mptester doctor --portal`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Dispatch(cmd.Context(), opts, runF, doctorRun)
		},
	}
	cmd.Flags().StringArrayVar(&opts.DNS, "dns", nil, "use `IFACE=ADDR[,ADDR]` as the resolvers of IFACE (repeatable)")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the result envelope as JSON")
	cmd.Flags().BoolVar(&opts.NAT64, "nat64", false, "name each path's NAT64 prefix (RFC 7050: one DNS query per path)")
	cmd.Flags().BoolVar(&opts.V6Blackhole, "v6-blackhole", false, "check each path for an IPv6 black hole (one DNS query to its IPv4 and one to its IPv6 resolvers)")
	cmd.Flags().BoolVar(&opts.Portal, "portal", false, "check each path for a captive portal (two DNS queries for names under .invalid per path; one plain HTTP request when both resolve)")
	return cmd
}

func doctorRun(ctx context.Context, opts *Options) error {
	paths, err := opts.Discover(ctx, opts.DNS)
	if err != nil {
		return err
	}
	var hdr report.Header
	if opts.JSON {
		if hdr, err = report.NewHeader("doctor", opts.ProbeID(), paths, map[string]any{"dns": opts.DNS, "portal": opts.Portal, "v6_blackhole": opts.V6Blackhole, "nat64": opts.NAT64}); err != nil {
			return err
		}
	}
	checks := opts.Checks(ctx, paths)
	if opts.JSON {
		doc := report.Document{Header: hdr, FinishedAt: time.Now().UTC(), Status: report.StatusOK,
			Records: make([]json.RawMessage, 0, len(checks))}
		for _, c := range checks {
			b, err := json.Marshal(checkRecord{Type: RecordType, Check: c})
			if err != nil {
				return err
			}
			doc.Records = append(doc.Records, b)
		}
		if err := cmdutil.WriteJSON(opts.IO.Out, doc); err != nil {
			return err
		}
	} else if err := printTable(opts.IO, checks); err != nil {
		return err
	}
	failed := 0
	for _, c := range checks {
		if c.Status == doctor.StatusFail {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%w: %d of %d checks failed", cmdutil.ErrCheckFailed, failed, len(checks))
	}
	return nil
}

// ANSI colours; all the same length so tabwriter columns stay aligned.
var colours = map[doctor.Status]string{doctor.StatusOK: "\x1b[32m", doctor.StatusWarn: "\x1b[33m", doctor.StatusFail: "\x1b[31m"}

const reset = "\x1b[0m"

func printTable(io *cmdutil.IOStreams, checks []doctor.Check) error {
	tw := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tCHECK\tDETAIL")
	counts := map[doctor.Status]int{}
	for _, c := range checks {
		counts[c.Status]++
		status := string(c.Status)
		if io.IsStdoutTTY() {
			status = colours[c.Status] + status + reset
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", status, c.ID, c.Detail)
		if c.Fix != "" {
			fmt.Fprintf(tw, "\t\tfix: %s\n", c.Fix)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(io.Out, "\n%d ok, %d warn, %d fail\n",
		counts[doctor.StatusOK], counts[doctor.StatusWarn], counts[doctor.StatusFail])
	return err
}
