package cmdutil

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

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
	paths, err := probe.Discover(ctx, opts)
	if err != nil {
		return nil, err
	}
	// A resolver for an interface this host does not have would be
	// silently unused: the flag is wrong (a config file may be shared by
	// hosts, so there it is only a warning).
	for _, iface := range slices.Sorted(maps.Keys(flagDNS)) {
		p, err := probe.FindPath(paths, iface)
		if err != nil {
			return nil, FlagErrorf("--dns %s: no such interface (have %s)", iface, pathNames(paths))
		}
		for _, a := range flagDNS[iface] {
			if !p.Reaches(a.Addr()) {
				return nil, FlagErrorf("--dns %s=%s: %s has no IPv%d address to ask it from", iface, a, iface, probe.FamilyOf(a.Addr()))
			}
		}
	}
	if f.Config != nil && f.Logger != nil {
		for _, iface := range slices.Sorted(maps.Keys(opts.ConfigDNS)) {
			p, err := probe.FindPath(paths, iface)
			if err != nil {
				f.Logger.Warn("config names DNS servers for an interface this host does not have", "key", f.Config.Where("dns."+iface))
				continue
			}
			for _, a := range opts.ConfigDNS[iface] {
				if !p.Reaches(a.Addr()) {
					f.Logger.Warn("config DNS server not used: the path has no address of its family", "key", f.Config.Where("dns."+iface), "server", a)
				}
			}
		}
	}
	return paths, nil
}

func pathNames(ps []probe.Path) string {
	ns := make([]string, 0, len(ps))
	for _, p := range ps {
		ns = append(ns, p.Name)
	}
	return strings.Join(ns, ", ")
}

// ProbeID identifies this probe in results: the config's probe_id, or else
// a stable id derived from the machine id (hashed: it is not sent as is).
func (f *Factory) ProbeID() string {
	if f.Config != nil && f.Config.ProbeID != "" {
		return f.Config.ProbeID
	}
	for _, p := range []string{"/etc/machine-id", "/var/lib/dbus/machine-id"} {
		if b, err := os.ReadFile(p); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			sum := sha256.Sum256([]byte("mptester-probe:" + strings.TrimSpace(string(b))))
			return "m-" + hex.EncodeToString(sum[:8])
		}
	}
	if h, err := os.Hostname(); err == nil {
		sum := sha256.Sum256([]byte("mptester-probe:" + h))
		return "h-" + hex.EncodeToString(sum[:8])
	}
	return "unknown"
}

// SelectPaths returns the named paths (duplicates and blanks ignored), or
// by default every up, non-loopback path with a default route: the paths a
// multihomed host actually uses to reach the Internet.
func SelectPaths(all []probe.Path, names []string) ([]probe.Path, error) {
	var out []probe.Path
	if len(names) == 0 {
		for _, p := range all {
			if p.Up && p.Kind != probe.KindLoopback && p.DefaultRoute {
				out = append(out, p)
			}
		}
		if len(out) == 0 {
			return nil, FlagErrorf("no up path with a default route; name paths with --paths")
		}
		return out, nil
	}
	seen := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		p, err := probe.FindPath(all, n)
		if err != nil {
			return nil, FlagErrorf("--paths: %v", err)
		}
		if !p.Up {
			return nil, FlagErrorf("--paths: %s is down", n)
		}
		out = append(out, p)
	}
	return out, nil
}
