// Package ifaces implements `mptester ifaces`: every network path of the
// host with its kind, addresses, default route and DNS servers.
package ifaces

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/probe"
)

// Options for `mptester ifaces`.
type Options struct {
	IO       *cmdutil.IOStreams
	Discover func(ctx context.Context, dnsFlags []string) ([]probe.Path, error)

	DNS    []string
	JSON   bool
	All    bool
	NAT64  bool
	Portal bool
	// V6Blackhole: ask each path's IPv4 and IPv6 resolvers (--v6-blackhole).
	V6Blackhole bool
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
and last /etc/resolv.conf, whose servers are shared by every path.

NOTES says what a path's addresses mean for measurements: IPv6-only (IPv4
targets are skipped, or reached through a NAT64), a carrier-grade NAT
address (100.64.0.0/10: unsolicited inbound impossible). --nat64 asks each
path's DNS servers for ipv4only.arpa's AAAA records (RFC 7050): a DNS64
synthesizes them, and the prefix they carry (RFC 6052) is the path's NAT64
prefix.`,
		Example: `  mptester ifaces
  mptester ifaces --json --dns wwan0=198.18.100.2
  mptester ifaces --nat64`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Dispatch(cmd.Context(), opts, runF, ifacesRun)
		},
	}
	cmd.Flags().StringArrayVar(&opts.DNS, "dns", nil, "use `IFACE=ADDR[,ADDR]` as the resolvers of IFACE (repeatable)")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&opts.NAT64, "nat64", false, "discover each path's NAT64 prefix through its DNS (RFC 7050: one query per path)")
	cmd.Flags().BoolVar(&opts.Portal, "portal", false, "check each path for a captive portal (two DNS queries for names under .invalid per path; one plain HTTP request when both resolve)")
	cmd.Flags().BoolVar(&opts.V6Blackhole, "v6-blackhole", false, "check each path for an IPv6 black hole (one DNS query to its IPv4 and one to its IPv6 resolvers)")
	return cmd
}

// pathInfo is a path with what ifaces found out about it.
type pathInfo struct {
	probe.Path
	// NAT64: the prefixes RFC 7050 discovery found (--nat64; empty: the
	// path's resolver is no DNS64).
	NAT64 []netip.Prefix `json:"nat64_prefixes,omitempty"`
	// NAT64Error: the discovery failed (no DNS server, no answer).
	NAT64Error string `json:"nat64_error,omitempty"`
	// Portal: what showed a captive portal on the path (--portal).
	Portal string `json:"portal,omitempty"`
	// V6Blackhole: what showed an IPv6 black hole on the path
	// (--v6-blackhole).
	V6Blackhole string   `json:"v6_blackhole,omitempty"`
	Notes       []string `json:"notes,omitempty"`
}

func describe(ctx context.Context, p probe.Path, opts *Options) pathInfo {
	pi := pathInfo{Path: p}
	_, has4 := p.SourceAddr(probe.Family4)
	_, has6 := p.SourceAddr(probe.Family6)
	if p.Up && has6 && !has4 && p.Kind != probe.KindLoopback {
		pi.Notes = append(pi.Notes, "IPv6-only: IPv4 targets are skipped unless a NAT64 translates them")
	}
	for _, a := range p.Addrs {
		if probe.CGNAT.Contains(a.IP) {
			pi.Notes = append(pi.Notes, fmt.Sprintf("CGNAT address %s (RFC 6598): behind a carrier-grade NAT, unsolicited inbound impossible", a.IP))
		}
	}
	if !p.Up || p.Kind == probe.KindLoopback {
		return pi
	}
	if opts.Portal {
		if why := probe.DetectPortal(ctx, p, time.Second); why != "" {
			pi.Portal = why
			pi.Notes = append(pi.Notes, "captive portal ("+why+"): measurements there reach the portal, not the Internet")
		}
	}
	if opts.V6Blackhole {
		if why := probe.DetectV6Blackhole(ctx, p, time.Second); why != "" {
			pi.V6Blackhole = why
			pi.Notes = append(pi.Notes, "IPv6 black hole ("+why+"): IPv6 measurements there time out although the path looks dual-stack")
		}
	}
	if !opts.NAT64 {
		return pi
	}
	r, err := probe.NewResolver(p, probe.ResolverOptions{Timeout: time.Second, Retries: 1})
	if err != nil {
		pi.NAT64Error = err.Error()
		return pi
	}
	pfx, err := probe.DiscoverNAT64(ctx, r)
	if err != nil {
		pi.NAT64Error = err.Error()
		return pi
	}
	pi.NAT64 = pfx
	for _, x := range pfx {
		pi.Notes = append(pi.Notes, fmt.Sprintf("NAT64 %s (RFC 7050): IPv4 is reached through a translator; synthesized AAAA answers map to IPv4", x))
	}
	return pi
}

func ifacesRun(ctx context.Context, opts *Options) error {
	paths, err := opts.Discover(ctx, opts.DNS)
	if err != nil {
		return err
	}
	infos := make([]pathInfo, len(paths))
	var wg sync.WaitGroup
	for i, p := range paths {
		wg.Add(1)
		go func() { defer wg.Done(); infos[i] = describe(ctx, p, opts) }()
	}
	wg.Wait()
	if opts.JSON {
		return cmdutil.WriteJSON(opts.IO.Out, infos)
	}
	return printTable(opts.IO, infos)
}

func printTable(io *cmdutil.IOStreams, paths []pathInfo) error {
	tw := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tINDEX\tKIND\tUP\tDEFAULT\tMTU\tADDRESSES\tDNS\tNOTES")
	for _, p := range paths {
		addrs := make([]string, 0, len(p.Addrs))
		for _, a := range p.Addrs {
			addrs = append(addrs, fmt.Sprintf("%s/%d", a.IP, a.PrefixLen))
		}
		dns := make([]string, 0, len(p.DNS))
		for _, d := range p.DNS {
			dns = append(dns, fmt.Sprintf("%s (%s)", d.Addr, d.Source))
		}
		notes := p.Notes
		if p.NAT64Error != "" {
			notes = append(notes, "NAT64 discovery failed: "+p.NAT64Error)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", p.Name, p.Index, p.Kind, yesNo(p.Up), yesNo(p.DefaultRoute), p.MTU,
			dashIfEmpty(strings.Join(addrs, " ")), dashIfEmpty(strings.Join(dns, " ")), dashIfEmpty(strings.Join(notes, "; ")))
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
