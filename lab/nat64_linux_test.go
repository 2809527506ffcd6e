package lab_test

import (
	"context"
	"net/netip"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/mptester/mptester/internal/nstest"
	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/labtest"
	"github.com/mptester/mptester/probe"
)

func requireNAT64(t *testing.T) {
	t.Helper()
	for _, bin := range []string{"tayga", "unbound"} {
		if _, err := exec.LookPath(bin); err != nil {
			nstest.SkipUnless(t, "nat64 lab tests need "+bin+": apt-get install tayga unbound")
		}
	}
}

// A nat64 wwan0 is IPv6-only behind Debian's tayga with unbound's DNS64:
// an IPv4-only name gets an AAAA synthesized under the planted prefix, a
// dual-stack name its real AAAA; the synthesized address reaches the
// IPv4 server through the translator; RFC 7050 discovery finds the
// prefix on wwan0 and none on wlan0 (dual-stack, no DNS64).
func TestLabNAT64(t *testing.T) {
	requireNAT64(t)
	yes := true
	l := labtest.Start(t, lab.Options{Impair: map[string]lab.ImpairChange{"wwan0": {NAT64: &yes}}})
	n := lab.NAT64Of("wwan0")
	if !labtest.IsChild() {
		st := l.Status(t)
		if len(st.Impairments) != 1 || st.Impairments[0].Path != "wwan0" || st.Impairments[0].Kind != "nat64" || st.Impairments[0].Prefix != n.Prefix.String() {
			t.Errorf("status impairments %+v, want wwan0 nat64 with prefix %s", st.Impairments, n.Prefix)
		}
		if r := l.Config().Resolvers["wwan0"]; !slices.Equal(r, []string{"fd00:100::2"}) {
			t.Errorf("wwan0 resolvers %v, want only the DNS64 fd00:100::2", r)
		}
	}
	if !l.InClient(t) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wwan, wlan := l.Path(t, "wwan0"), l.Path(t, "wlan0")
	if a, ok := wwan.SourceAddr(probe.Family4); ok {
		t.Errorf("nat64 wwan0 has IPv4 address %s", a)
	}
	r, err := probe.NewResolver(wwan, probe.ResolverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	synth, _ := probe.Embed4(n.Prefix, lab.V4OnlyAddr)
	for name, want := range map[string]netip.Addr{lab.V4OnlyName: synth, lab.ServerName: lab.Server6} {
		lk := r.Lookup(ctx, name, probe.Family6)
		if !slices.Equal(lk.Answers, []netip.Addr{want}) {
			t.Errorf("wwan0 AAAA %s = %v (%s), want %s", name, lk.Answers, lk.Status, want)
		}
	}
	pfx, err := probe.DiscoverNAT64(ctx, r)
	if err != nil || !slices.Equal(pfx, []netip.Prefix{n.Prefix}) {
		t.Errorf("wwan0 NAT64 discovery = %v, %v; want %s", pfx, err, n.Prefix)
	}
	r4, err := probe.NewResolver(wlan, probe.ResolverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pfx, err := probe.DiscoverNAT64(ctx, r4); err != nil || len(pfx) != 0 {
		t.Errorf("wlan0 NAT64 discovery = %v, %v; want none", pfx, err)
	}
	dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
	defer dcancel()
	c, err := probe.DialContext(dctx, wwan, "tcp", netip.AddrPortFrom(synth, lab.PortHTTPS).String())
	if err != nil {
		t.Fatalf("wwan0 to %s through the NAT64: %v", synth, err)
	}
	c.Close()
}
