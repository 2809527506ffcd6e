// Package ifaces implements `mptester ifaces`: every network path of the
// host with its kind, addresses, default route and DNS servers.
package ifaces

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/probe"
)

// Options for `mptester ifaces`.
type Options struct {
	IO       *cmdutil.IOStreams
	Discover func(ctx context.Context, dnsFlags []string) ([]probe.Path, error)

	DNS  []string
	JSON bool
	All  bool
}

// NewCmdIfaces builds the command; runF replaces ifacesRun in tests.
func NewCmdIfaces(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Discover: f.DiscoverPaths}
	cmd := &cobra.Command{
		Use:   "ifaces",
		Short: "List network paths: kind, addresses, default route, DNS servers",
		Long: `List every interface of this host as a measurement path.

DNS servers come, per interface, from the first source that has any:
--dns flag, config file (dns:), systemd-resolved, NetworkManager (Linux),
scoped resolvers of scutil --dns (macOS), adapter settings (Windows),
and last /etc/resolv.conf, whose servers are shared by every path.`,
		Example: `  mptester ifaces
  mptester ifaces --json --dns wwan0=198.18.100.2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Dispatch(cmd.Context(), opts, runF, ifacesRun)
		},
	}
	cmd.Flags().StringArrayVar(&opts.DNS, "dns", nil, "use `IFACE=ADDR[,ADDR]` as the resolvers of IFACE (repeatable)")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON")
	return cmd
}

func ifacesRun(ctx context.Context, opts *Options) error {
	paths, err := opts.Discover(ctx, opts.DNS)
	if err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.IO.Out, paths)
	}
	return printTable(opts.IO, paths)
}

func printTable(io *cmdutil.IOStreams, paths []probe.Path) error {
	tw := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tINDEX\tKIND\tUP\tDEFAULT\tMTU\tADDRESSES\tDNS")
	for _, p := range paths {
		addrs := make([]string, 0, len(p.Addrs))
		for _, a := range p.Addrs {
			addrs = append(addrs, fmt.Sprintf("%s/%d", a.IP, a.PrefixLen))
		}
		dns := make([]string, 0, len(p.DNS))
		for _, d := range p.DNS {
			dns = append(dns, fmt.Sprintf("%s (%s)", d.Addr, d.Source))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\n", p.Name, p.Index, p.Kind, yesNo(p.Up), yesNo(p.DefaultRoute), p.MTU,
			dashIfEmpty(strings.Join(addrs, " ")), dashIfEmpty(strings.Join(dns, " ")))
	}
	return tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
