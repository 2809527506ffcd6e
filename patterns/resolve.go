package patterns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mptester/mptester/probe"
)

// ServerResolution says how a test's server address was found: by the DNS
// servers of a path, queried through that path (a path's resolver may
// answer differently from another's, which is what the study measures), or
// by the system resolver when the path has no DNS server of its own.
type ServerResolution struct {
	Host      string `json:"host"`                 // the name given
	Path      string `json:"path"`                 // the path the name was resolved on
	DNSServer string `json:"dns_server,omitempty"` // the server that answered this family's query
	System    bool   `json:"system,omitempty"`     // resolved by the system resolver instead
}

// server is a candidate test server after name resolution: its addresses
// are per path, because each path asks its own DNS servers.
type server struct {
	name    string               // as given
	host    string               // SNI / certificate name
	port    uint16               // from HOST:PORT: every transport uses it; 0: RunOptions.Ports
	literal []netip.Addr         // the host is an IP literal: every path uses it
	byPath  map[string]pathAddrs // path name -> what that path resolved
}

type pathAddrs struct {
	err   error // the name did not resolve on this path (ErrServerUnresolved)
	addrs []netip.Addr
	res   ServerResolution
	dns   map[probe.Family]string // family -> DNS server that answered
}

// Resolution parameters for a server name: a few seconds at most, as for a
// stub resolver.
const (
	serverDNSTimeout = 2 * time.Second
	serverDNSRetries = 2
)

// systemLookup is the fallback resolver for paths without DNS servers (a
// variable so that a test can prove it is not used).
var systemLookup = net.DefaultResolver.LookupNetIP

// parseServer parses HOST[:PORT] and resolves HOST on every path of o with
// that path's own DNS servers. A path that cannot resolve it keeps the
// error: its tests end as dns-error while the other paths run (a cellular
// resolver failing must not lose the Wi-Fi measurements). Only a name no
// path resolves is an error.
func parseServer(ctx context.Context, o RunOptions, s string) (server, error) {
	host, port := s, ""
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
	}
	sv := server{name: s, host: host}
	if port != "" {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return sv, fmt.Errorf("server %q: invalid port", s)
		}
		sv.port = uint16(n)
	}
	if host == "" {
		return sv, fmt.Errorf("server %q: empty host", s)
	}
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		sv.literal = []netip.Addr{ip.Unmap()}
		return sv, nil
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	fam := probe.FamilyAny
	if len(o.Families) == 1 {
		fam = o.Families[0]
	}
	sv.byPath = make(map[string]pathAddrs, len(o.Paths))
	errs := make([]error, len(o.Paths))
	var mu sync.Mutex
	var wg sync.WaitGroup
	system := sync.OnceValues(func() ([]netip.Addr, error) { return systemLookup(ctx, "ip", host) })
	for i, p := range o.Paths {
		wg.Go(func() {
			pa, err := resolveOnPath(ctx, p, host, fam, system, logger)
			if err != nil {
				errs[i] = fmt.Errorf("server %q: %w", s, err)
				if !errors.Is(err, ErrServerUnresolved) {
					return
				}
				pa.err = errs[i]
			}
			mu.Lock()
			sv.byPath[p.Name] = pa
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return sv, err
	}
	var failed []error
	for i, err := range errs {
		switch {
		case err == nil:
		case !errors.Is(err, ErrServerUnresolved):
			return sv, err // a local failure (e.g. binding), not an answer
		default:
			failed = append(failed, err)
			logger.Warn("server name not resolved on this path; its tests end with dns-error", "path", o.Paths[i].Name, "err", err)
		}
	}
	if len(failed) == len(o.Paths) {
		return sv, errors.Join(failed...)
	}
	return sv, nil
}

// resolveOnPath looks host up with p's DNS servers through p, or with the
// system resolver when p has none.
func resolveOnPath(ctx context.Context, p probe.Path, host string, fam probe.Family,
	system func() ([]netip.Addr, error), logger *slog.Logger) (pathAddrs, error) {
	pa := pathAddrs{res: ServerResolution{Host: host, Path: p.Name}, dns: map[probe.Family]string{}}
	r, err := probe.NewResolver(p, probe.ResolverOptions{Timeout: serverDNSTimeout, Retries: serverDNSRetries})
	if errors.Is(err, probe.ErrNoDNS) || isLocalhost(host) {
		if err != nil {
			logger.Warn("path has no DNS server; resolving the test server with the system resolver", "path", p.Name, "server", host)
		}
		ips, err := system()
		if err != nil {
			return pa, fmt.Errorf("%w: system resolver (for path %s): %w", ErrServerUnresolved, p.Name, err)
		}
		for _, ip := range ips {
			pa.addrs = append(pa.addrs, ip.Unmap())
		}
		pa.res.System = true
		return pa, nil
	}
	if err != nil {
		return pa, err
	}
	l := r.Lookup(ctx, host, fam)
	if ctx.Err() != nil {
		return pa, ctx.Err()
	}
	if l.Status != probe.DNSNoError {
		return pa, fmt.Errorf("%w: resolving %s on path %s (DNS %s): %s%s", ErrServerUnresolved, host, p.Name, joinAddrs(r.Servers()), l.Status, queryErr(l))
	}
	pa.addrs = l.Answers
	for _, q := range l.Queries {
		if q.Status == probe.DNSNoError && q.Server.IsValid() {
			f := probe.Family4
			if q.QType == "AAAA" {
				f = probe.Family6
			}
			pa.dns[f] = q.Server.String()
		}
	}
	return pa, nil
}

// isLocalhost: RFC 6761 names never reach a DNS server; the system
// resolver (its hosts file) answers them.
func isLocalhost(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}

func joinAddrs(as []netip.AddrPort) string {
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = a.String()
	}
	return strings.Join(parts, ", ")
}

func queryErr(l probe.Lookup) string {
	for _, q := range l.Queries {
		if q.Err != nil {
			return " (" + q.Err.Error() + ")"
		}
	}
	return ""
}

// addr returns the server's first address of family f (any if FamilyAny)
// as resolved on path p.
func (sv server) addr(p probe.Path, f probe.Family) (netip.Addr, bool) {
	addrs := sv.literal
	if sv.literal == nil {
		addrs = sv.byPath[p.Name].addrs
	}
	for _, a := range addrs {
		if f == probe.FamilyAny || probe.FamilyOf(a) == f {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// unresolved is why the name did not resolve on p (nil if it did).
func (sv server) unresolved(p probe.Path) error { return sv.byPath[p.Name].err }

// resolution says how the address addr(p, f) was found; nil for a literal.
func (sv server) resolution(p probe.Path, f probe.Family) *ServerResolution {
	pa, ok := sv.byPath[p.Name]
	if sv.literal != nil || !ok {
		return nil
	}
	res := pa.res
	if a, ok := sv.addr(p, f); ok {
		res.DNSServer = pa.dns[probe.FamilyOf(a)]
	}
	return &res
}

// ResolveOnPath resolves host as `run --server` does on one path: with p's
// own DNS servers through p, or the system resolver when p has none; an IP
// literal is itself. For other commands that bind a client per path
// (`mptester fetch`).
func ResolveOnPath(ctx context.Context, p probe.Path, host string, fam probe.Family, logger *slog.Logger) ([]netip.Addr, ServerResolution, error) {
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Addr{ip.Unmap()}, ServerResolution{Host: host, Path: p.Name}, nil
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	pa, err := resolveOnPath(ctx, p, host, fam, func() ([]netip.Addr, error) { return systemLookup(ctx, "ip", host) }, logger)
	return pa.addrs, pa.res, err
}
