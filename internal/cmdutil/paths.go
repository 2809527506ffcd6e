package cmdutil

import (
	"context"
	"fmt"

	"github.com/mptester/mptester/probe"
)

// DiscoverPaths lists the host's paths with DNS overrides applied in the
// documented precedence: --dns flag values, then the config file's dns
// section, then what the OS says. Every command that needs paths calls this.
func (f *Factory) DiscoverPaths(ctx context.Context, dnsFlags []string) ([]probe.Path, error) {
	flagDNS, err := probe.ParseDNSFlag(dnsFlags)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	opts := probe.DiscoverOptions{FlagDNS: flagDNS}
	if f.Config != nil {
		cfgDNS, err := probe.ParseDNSConfig(f.Config.DNS)
		if err != nil {
			return nil, fmt.Errorf("%w: config file %s: %w", ErrUsage, f.ConfigPath, err)
		}
		opts.ConfigDNS = cfgDNS
	}
	return probe.Discover(ctx, opts)
}
