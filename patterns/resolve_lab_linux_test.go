//go:build linux

package patterns

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/labtest"
	"github.com/mptester/mptester/lab/world"
	"github.com/mptester/mptester/probe"
)

// TestLabServerNameResolvedPerPath: in the lab each path's resolver has its
// own view of the world; a server name is resolved on each path by that
// path's resolver, so a name whose views differ gets each path's own
// addresses (the ground truth is the world's views), and a name one path's
// resolver does not know is that path's error only.
func TestLabServerNameResolvedPerPath(t *testing.T) {
	l := labtest.Start(t, lab.Options{Domains: 200, Seed: 5})
	if !l.InClient(t) {
		return
	}
	noSystemResolver(t)
	w, err := world.Load(l.Config().Files.World)
	if err != nil {
		t.Fatal(err)
	}
	paths := []probe.Path{l.Path(t, "wlan0"), l.Path(t, "wwan0")}
	var differ, nx *world.Domain
	for i := range w.Domains {
		d := &w.Domains[i]
		a, b := d.View("wlan0"), d.View("wwan0")
		switch {
		case differ == nil && a.Status == "NOERROR" && b.Status == "NOERROR" && len(a.A) > 0 && len(b.A) > 0 &&
			!slices.Equal(sorted(a.A), sorted(b.A)):
			differ = d
		case nx == nil && a.Status == "NOERROR" && len(a.A) > 0 && b.Status == "NXDOMAIN":
			nx = d
		}
	}
	if differ == nil || nx == nil {
		t.Fatalf("the lab world (seed 5) has no domain with different IPv4 views (%v) or NXDOMAIN on wwan0 only (%v)", differ, nx)
	}
	o := RunOptions{Paths: paths, Families: []probe.Family{probe.Family4}}
	sv, err := parseServer(context.Background(), o, differ.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		want := sorted(differ.View(p.Name).A)
		if got := sorted(sv.byPath[p.Name].addrs); !slices.Equal(got, want) {
			t.Errorf("%s on %s: %v, want the %s view %v", differ.Name, p.Name, got, p.Name, want)
		}
		res := sv.resolution(p, probe.Family4)
		if res == nil || res.Path != p.Name || !slices.Contains(l.Config().Resolvers[p.Name], addrOnly(res.DNSServer)) {
			t.Errorf("%s: resolution %+v, want one of the path's resolvers %v", p.Name, res, l.Config().Resolvers[p.Name])
		}
	}
	// NXDOMAIN on wwan0 only: wlan0 keeps its view's addresses, wwan0 the
	// error (its tests end as dns-error; the run goes on).
	sv, err = parseServer(context.Background(), o, nx.Name)
	if err != nil {
		t.Fatalf("%s (NXDOMAIN on wwan0 only): %v", nx.Name, err)
	}
	if got, want := sorted(sv.byPath["wlan0"].addrs), sorted(nx.View("wlan0").A); sv.unresolved(paths[0]) != nil || !slices.Equal(got, want) {
		t.Errorf("%s on wlan0: %v (%v), want %v", nx.Name, got, sv.unresolved(paths[0]), want)
	}
	if err := sv.unresolved(paths[1]); err == nil || !strings.Contains(err.Error(), "path wwan0") || !strings.Contains(err.Error(), "NXDOMAIN") {
		t.Errorf("%s on wwan0: %v, want NXDOMAIN naming the path", nx.Name, err)
	}
}

func sorted[T interface{ Compare(T) int }](xs []T) []T {
	out := slices.Clone(xs)
	slices.SortFunc(out, func(a, b T) int { return a.Compare(b) })
	return out
}

func addrOnly(ap string) string {
	a, err := netip.ParseAddrPort(ap)
	if err != nil {
		return ap
	}
	return a.Addr().String()
}
