package lab_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/internal/nstest"
	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/labtest"
)

type smokeRecord struct {
	Config struct {
		Transport string `json:"transport"`
		Path      string `json:"path"`
		Family    int    `json:"family"`
	} `json:"config"`
	Status string `json:"status"`
	Cause  string `json:"cause"`
}

// smoke runs `mptester run --smoke` in the lab's client namespace and
// returns its exit code, the FAIL lines and the records.
func smoke(t *testing.T, name, dir string, args ...string) (int, []string, []smokeRecord) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv := append([]string{"lab", "exec", "--name", name, "--dir", dir, "--", exe, "run", "--smoke", "--insecure",
		"--paths", "wlan0,wwan0", "--patterns", "ping", "--ping-count", "2", "--pace", "0s",
		"--connect-timeout", "2s", "--log-level", "warn"}, args...)
	code, out, stderr := run(t, argv...)
	var doc struct {
		Records []smokeRecord `json:"records"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("smoke %v: exit %d, output: %v\n%s\n%s", args, code, err, out, stderr)
	}
	var fails []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "FAIL ") {
			fails = append(fails, l)
		}
	}
	return code, fails, doc.Records
}

// causes renders the records that name a cause as "transport path IPvF cause".
func causes(recs []smokeRecord) []string {
	var out []string
	for _, r := range recs {
		if r.Cause != "" {
			out = append(out, r.Config.Transport+" "+r.Config.Path+" "+string(rune('0'+r.Config.Family))+" "+r.Cause)
		}
	}
	slices.Sort(out)
	return out
}

// TestLabSmokeNamesCauses: run --smoke names the network's part in a
// failure from what it measured after the test, and nothing in a clean
// lab: UDP 443 blocked on wlan0 (QUIC's alternate port 6121 works there),
// IPv6 black-holed on wlan0 (IPv4 works), MPTCP options stripped on wlan0
// (wwan0 negotiates MPTCP with the same server), and a server without
// MPTCP (no path negotiates it); QUIC passes a path-MTU black hole, TLS
// over TCP names it; a
// middlebox cutting UDP flows to 443 after their first packets; a
// captive portal.
func TestLabSmokeNamesCauses(t *testing.T) {
	labtest.Require(t)
	if _, err := exec.LookPath("nft"); err != nil {
		nstest.SkipUnless(t, "impairment tests need nftables (nft)")
	}
	t.Setenv(envMain, "1")
	name, dir := uniqueName(), shortDir(t)
	t.Cleanup(func() { _ = lab.CleanStale(context.Background(), name, dir) })
	code, _, stderr := run(t, "lab", "up", "--name", name, "--dir", dir, "--domains", "0", "--wlan0", "delay=2ms block=udp/443", "--wwan0", "delay=2ms")
	if code != 0 {
		t.Fatalf("lab up: exit %d: %s", code, stderr)
	}
	set := func(args ...string) {
		t.Helper()
		if code, _, stderr := run(t, append([]string{"lab", "set", "--name", name, "--dir", dir}, args...)...); code != 0 {
			t.Fatalf("lab set %v: exit %d: %s", args, code, stderr)
		}
	}
	server := "--server=" + lab.ServerName

	// Acceptance: exit 7, the QUIC tests over wlan0 fail naming
	// udp-blocked:443, wwan0 passes.
	code, fails, recs := smoke(t, name, dir, server, "--transports", "tcp,quic", "--family", "both")
	want := []string{"quic wlan0 4 udp-blocked:443", "quic wlan0 6 udp-blocked:443"}
	if code != cmdutil.ExitCheckFailed || !slices.Equal(causes(recs), want) || len(fails) != 2 {
		t.Errorf("block=udp/443: exit %d, causes %q, FAIL lines %q; want exit 7, %q on two lines", code, causes(recs), fails, want)
	}
	for _, f := range fails {
		if !strings.Contains(f, "over wlan0") || !strings.Contains(f, "(cause udp-blocked:443)") {
			t.Errorf("FAIL line %q: want wlan0 and the cause", f)
		}
	}

	set("wlan0", "block=off", "v6=blackhole")
	code, fails, recs = smoke(t, name, dir, server, "--transports", "tcp,quic", "--family", "both")
	// The alternate port's check (its record is in the document too)
	// fails over wlan0's IPv6 as well.
	want = []string{"quic wlan0 6 v6-blackhole", "quic wlan0 6 v6-blackhole", "tcp wlan0 6 v6-blackhole"}
	if code != cmdutil.ExitCheckFailed || !slices.Equal(causes(recs), want) || len(fails) != 3 {
		t.Errorf("v6=blackhole: exit %d, causes %q, FAIL lines %q; want exit 7, %q", code, causes(recs), fails, want)
	}
	for _, f := range fails {
		if !strings.Contains(f, "over wlan0 (IPv6)") || !strings.Contains(f, "(cause v6-blackhole)") {
			t.Errorf("FAIL line %q: want wlan0, IPv6 and the cause", f)
		}
	}

	set("wlan0", "v6=ok", "strip=mptcp")
	code, fails, recs = smoke(t, name, dir, server, "--transports", "mptcp", "--family", "4")
	want = []string{"mptcp wlan0 4 mptcp-stripped"}
	if code != cmdutil.ExitCheckFailed || !slices.Equal(causes(recs), want) || len(fails) != 1 || !strings.Contains(fails[0], "(cause mptcp-stripped)") {
		t.Errorf("strip=mptcp: exit %d, causes %q, FAIL lines %q; want exit 7, %q", code, causes(recs), fails, want)
	}

	// A path-MTU black hole: QUIC (quic-go and mpquic) starts at 1232-byte
	// datagrams and completes ping and bulk over both families.
	set("wlan0", "strip=off", "pmtu=1280,icmp=drop")
	code, fails, recs = smoke(t, name, dir, server, "--transports", "quic,mpquic", "--patterns", "bulk", "--family", "both")
	if code != 0 || len(causes(recs)) != 0 || len(fails) != 0 {
		t.Errorf("pmtu=1280,icmp=drop: exit %d, causes %q, FAIL lines %q; want QUIC to pass", code, causes(recs), fails)
	}
	// TLS over TCP does not pass it (the server's certificate flight is
	// in full-size segments): the run names pmtu-blackhole, from a
	// handshake with a clamped MSS that completes.
	code, fails, recs = smoke(t, name, dir, server, "--transports", "tcp", "--family", "4")
	want = []string{"tcp wlan0 4 pmtu-blackhole"}
	if code != cmdutil.ExitCheckFailed || !slices.Equal(causes(recs), want) || len(fails) != 1 || !strings.Contains(fails[0], "(cause pmtu-blackhole)") {
		t.Errorf("pmtu=1280,icmp=drop over TCP: exit %d, causes %q, FAIL lines %q; want exit 7, %q", code, causes(recs), fails, want)
	}

	// A middlebox that cuts each UDP flow to 443 after its first packets:
	// QUIC connects, then stalls; the alternate port runs a whole ping.
	set("wlan0", "pmtu=off", "icmp=pass", "quic-interfere=443")
	code, fails, recs = smoke(t, name, dir, server, "--transports", "quic", "--family", "4", "--timeout", "4s")
	want = []string{"quic wlan0 4 udp-interfered:443"}
	if code != cmdutil.ExitCheckFailed || !slices.Equal(causes(recs), want) || len(fails) != 1 || !strings.Contains(fails[0], "(cause udp-interfered:443)") {
		t.Errorf("quic-interfere=443: exit %d, causes %q, FAIL lines %q; want exit 7, %q", code, causes(recs), fails, want)
	}

	// A captive portal on wlan0: its tests fail (TCP meets the portal's
	// certificate, QUIC is dropped) and each names portal, from the
	// portal's answer to plain HTTP; wwan0 passes.
	set("wlan0", "quic-interfere=off", "portal")
	code, fails, recs = smoke(t, name, dir, server, "--transports", "tcp,quic", "--family", "4")
	want = []string{"quic wlan0 4 portal", "quic wlan0 4 portal", "tcp wlan0 4 portal"}
	if code != cmdutil.ExitCheckFailed || !slices.Equal(causes(recs), want) || len(fails) != 3 {
		t.Errorf("portal: exit %d, causes %q, FAIL lines %q; want exit 7, %q", code, causes(recs), fails, want)
	}
	for _, f := range fails {
		if !strings.Contains(f, "over wlan0") || !strings.Contains(f, "(cause portal)") {
			t.Errorf("FAIL line %q: want wlan0 and the cause", f)
		}
	}

	// The clean lab through the same detectors: nothing named.
	set("wlan0", "portal=off")
	code, fails, recs = smoke(t, name, dir, server, "--transports", "tcp,quic,mptcp", "--family", "both")
	if code != 0 || len(causes(recs)) != 0 || len(fails) != 0 {
		t.Errorf("clean lab: exit %d, causes %q, FAIL lines %q; want 0 and none", code, causes(recs), fails)
	}

	// A server without MPTCP (a plain TCP listener: started while the
	// Internet namespace had MPTCP disabled) on port 8443.
	exe, _ := os.Executable()
	ins := lab.InternetNS(name)
	sysctl := func(v string) {
		t.Helper()
		if out, err := exec.Command("ip", "netns", "exec", ins, "sysctl", "-qw", "net.mptcp.enabled="+v).CombinedOutput(); err != nil {
			t.Fatalf("sysctl: %v: %s", err, out)
		}
	}
	sysctl("0")
	srv := exec.Command("ip", "netns", "exec", ins, exe, "serve", "--tcp-port", "8443", "--transports", "tcp", "--listen", lab.Server4.String(), "--log-level", "warn")
	srv.Env = append(os.Environ(), envMain+"=1")
	if err := srv.Start(); err != nil {
		sysctl("1")
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	listening := false
	for range 100 {
		if err := lab.InNS(ins, func() error {
			c, err := net.DialTimeout("tcp", lab.Server4.String()+":8443", 100*time.Millisecond)
			if err == nil {
				c.Close()
			}
			return err
		}); err == nil {
			listening = true
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	sysctl("1")
	if !listening {
		t.Fatal("serve on 8443 never listened")
	}
	code, fails, recs = smoke(t, name, dir, "--server="+lab.Server4.String()+":8443", "--transports", "mptcp", "--family", "4")
	want = []string{"mptcp wlan0 4 mptcp-not-offered"}
	if code != cmdutil.ExitCheckFailed || !slices.Equal(causes(recs), want) || len(fails) != 1 {
		t.Errorf("server without MPTCP: exit %d, causes %q, FAIL lines %q; want exit 7, %q", code, causes(recs), fails, want)
	}
	if code, _, stderr := run(t, "lab", "down", "--purge", "--name", name, "--dir", dir); code != 0 {
		t.Errorf("lab down: exit %d: %s", code, stderr)
	}
}

// ifacesPath is a path of `ifaces --json` with what the lab tests read.
type ifacesPath struct {
	Name   string   `json:"name"`
	NAT64  []string `json:"nat64_prefixes"`
	Err    string   `json:"nat64_error"`
	Portal string   `json:"portal"`
	V6     string   `json:"v6_blackhole"`
	Notes  []string `json:"notes"`
}

// labIfaces brings a lab up with one path's impairment (tools: the
// binaries it needs), runs `ifaces --json` with flags inside it and
// returns wlan0's and wwan0's entries (both must be listed), and a way to
// run another mptester command inside the lab; the lab goes down (and
// must) when the test ends.
func labIfaces(t *testing.T, path, impairment string, tools []string, flags ...string) (map[string]ifacesPath, func(args ...string) (int, string, string)) {
	t.Helper()
	labtest.Require(t)
	for _, bin := range tools {
		if _, err := exec.LookPath(bin); err != nil {
			nstest.SkipUnless(t, impairment+" lab tests need "+bin)
		}
	}
	t.Setenv(envMain, "1")
	name, dir := uniqueName(), shortDir(t)
	t.Cleanup(func() { _ = lab.CleanStale(context.Background(), name, dir) })
	if code, _, stderr := run(t, "lab", "up", "--name", name, "--dir", dir, "--domains", "0", "--no-serve", "--"+path, impairment); code != 0 {
		t.Fatalf("lab up: exit %d: %s", code, stderr)
	}
	t.Cleanup(func() {
		if code, _, stderr := run(t, "lab", "down", "--purge", "--name", name, "--dir", dir); code != 0 {
			t.Errorf("lab down: exit %d: %s", code, stderr)
		}
	})
	exe, _ := os.Executable()
	inLab := func(args ...string) (int, string, string) {
		return run(t, append([]string{"lab", "exec", "--name", name, "--dir", dir, "--", exe}, args...)...)
	}
	code, out, stderr := inLab(append([]string{"ifaces", "--json"}, flags...)...)
	if code != 0 {
		t.Fatalf("ifaces: exit %d: %s", code, stderr)
	}
	var list []ifacesPath
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("ifaces --json: %v\n%s", err, out)
	}
	paths := map[string]ifacesPath{}
	for _, p := range list {
		paths[p.Name] = p
	}
	for _, want := range lab.PathNames {
		if _, ok := paths[want]; !ok {
			t.Fatalf("ifaces did not list %s:\n%s", want, out)
		}
	}
	return paths, inLab
}

// TestLabIfacesNAT64: ifaces --nat64 and doctor --nat64 name the NAT64 prefix a nat64 path's
// DNS64 reveals (RFC 7050) and the path's IPv6-only addressing, and
// nothing on the dual-stack path.
func TestLabIfacesNAT64(t *testing.T) {
	paths, inLab := labIfaces(t, "wwan0", "nat64", []string{"tayga", "unbound"}, "--nat64")
	pfx := lab.NAT64Of("wwan0").Prefix.String()
	if p := paths["wwan0"]; !slices.Equal(p.NAT64, []string{pfx}) || len(p.Notes) != 2 || !strings.HasPrefix(p.Notes[0], "IPv6-only") {
		t.Errorf("wwan0: nat64 %v (%s), notes %q; want %s, IPv6-only and NAT64 notes", p.NAT64, p.Err, p.Notes, pfx)
	}
	if p := paths["wlan0"]; len(p.NAT64) != 0 || p.Err != "" || len(p.Notes) != 0 {
		t.Errorf("wlan0: nat64 %v (%s), notes %q; want none", p.NAT64, p.Err, p.Notes)
	}
	// doctor --nat64 names the same prefix on wwan0, none on wlan0.
	_, checks := doctorChecks(t, inLab, "--nat64")
	got := map[string]string{}
	for id, c := range checks {
		got[id] = c.Status + " " + c.Detail
	}
	if w := got["access.wwan0.nat64"]; !strings.HasPrefix(w, "ok prefix "+pfx+" ") || !strings.HasPrefix(got["access.wlan0.nat64"], "ok none") || len(got) != 2 {
		t.Errorf("doctor --nat64: %q; want wwan0 naming %s and wlan0 none", got, pfx)
	}
}

// In a lab with a cgnat wwan0, ifaces and doctor name wwan0's CGNAT
// address (measured on the interface) and nothing on wlan0.
func TestLabIfacesCGNAT(t *testing.T) {
	paths, inLab := labIfaces(t, "wwan0", "cgnat", []string{"nft"})
	addr := lab.CGNATOf("wwan0").Client4.String()
	if p := paths["wwan0"]; len(p.Notes) != 1 || !strings.Contains(p.Notes[0], "CGNAT address "+addr) {
		t.Errorf("wwan0 notes %q, want one naming CGNAT address %s", p.Notes, addr)
	}
	if p := paths["wlan0"]; len(p.Notes) != 0 {
		t.Errorf("wlan0 notes %q, want none", p.Notes)
	}
	_, out, stderr := inLab("doctor", "--json")
	if !strings.Contains(out, `"id": "access.wwan0.cgnat"`) || !strings.Contains(out, addr+" is in 100.64.0.0/10") || strings.Contains(out, "access.wlan0.cgnat") {
		t.Errorf("doctor does not name wwan0's CGNAT address %s (and only it):\n%s\n%s", addr, out, stderr)
	}
}

// In a lab whose wlan0 black-holes IPv6 (v6=blackhole: addresses and
// routes stay), ifaces --v6-blackhole and doctor --v6-blackhole name it
// on wlan0 from what they measured (its IPv4 resolver answers, its IPv6
// one does not) and nothing on wwan0.
func TestLabIfacesV6Blackhole(t *testing.T) {
	paths, inLab := labIfaces(t, "wlan0", "v6=blackhole", []string{"nft"}, "--v6-blackhole")
	wlan, _ := lab.Plan("wlan0")
	if p := paths["wlan0"]; !strings.HasPrefix(p.V6, "v6-blackhole: wlan0 has IPv6 address "+wlan.Client6.String()) || !strings.Contains(p.V6, wlan.Resolv6.String()) || len(p.Notes) != 1 {
		t.Errorf("wlan0: v6_blackhole %q, notes %q; want the black hole named with %s's silence", p.V6, p.Notes, wlan.Resolv6)
	}
	if p := paths["wwan0"]; p.V6 != "" || len(p.Notes) != 0 {
		t.Errorf("wwan0: v6_blackhole %q, notes %q; want none", p.V6, p.Notes)
	}
	_, checks := doctorChecks(t, inLab, "--v6-blackhole")
	got := map[string]string{}
	for id, c := range checks {
		got[id] = c.Status
	}
	if want := map[string]string{"access.wlan0.v6-blackhole": "warn", "access.wwan0.v6-blackhole": "ok"}; !maps.Equal(got, want) {
		t.Errorf("doctor --v6-blackhole: %v, want %v", got, want)
	}
}

// In a lab with a portal on wlan0, ifaces --portal and doctor --portal
// name it on wlan0 (from what they measured) and nothing on wwan0; doctor
// fails (exit 7) saying what the portal means for measurements.
func TestLabIfacesPortal(t *testing.T) {
	paths, inLab := labIfaces(t, "wlan0", "portal", []string{"nft"}, "--portal")
	if p := paths["wlan0"]; !strings.Contains(p.Portal, lab.PortalAddr4.String()) || len(p.Notes) != 1 || !strings.HasPrefix(p.Notes[0], "captive portal") {
		t.Errorf("wlan0: portal %q, notes %q; want the portal at %s", p.Portal, p.Notes, lab.PortalAddr4)
	}
	if p := paths["wwan0"]; p.Portal != "" || len(p.Notes) != 0 {
		t.Errorf("wwan0: portal %q, notes %q; want none", p.Portal, p.Notes)
	}
	code, checks := doctorChecks(t, inLab, "--portal")
	if c := checks["access.wlan0.portal"]; code != cmdutil.ExitCheckFailed || c.Status != "fail" || !strings.Contains(c.Detail, lab.PortalAddr4.String()) || !strings.Contains(c.Detail, "reach the portal") {
		t.Errorf("doctor --portal: exit %d, wlan0 %q; want exit 7 and a failed check naming the portal %s and what it means", code, c, lab.PortalAddr4)
	}
	if c := checks["access.wwan0.portal"]; c.Status != "ok" || len(checks) != 2 {
		t.Errorf("doctor --portal: wwan0 %q, portal checks %v; want ok and one check per path", c, checks)
	}
}

// TestLabSmokeMobileV6Only: run --smoke in the mobile-v6only world names
// udp-blocked:443 exactly where the truth's prefix-limited blocks cover
// the test server (wlan0 over IPv4: its /24 is blocked there), and
// nothing on wlan0's IPv6 nor on wwan0 (IPv6-only behind NAT64 and
// CGNAT), whose tests pass.
func TestLabSmokeMobileV6Only(t *testing.T) {
	labtest.Require(t)
	for _, bin := range []string{"nft", "tayga", "unbound"} {
		if _, err := exec.LookPath(bin); err != nil {
			nstest.SkipUnless(t, "the mobile-v6only world needs "+bin)
		}
	}
	t.Setenv(envMain, "1")
	name, dir := uniqueName(), shortDir(t)
	t.Cleanup(func() { _ = lab.CleanStale(context.Background(), name, dir) })
	if code, _, stderr := run(t, "lab", "up", "--name", name, "--dir", dir, "--domains", "0", "--world", "mobile-v6only"); code != 0 {
		t.Fatalf("lab up: exit %d: %s", code, stderr)
	}
	t.Cleanup(func() { run(t, "lab", "down", "--purge", "--name", name, "--dir", dir) })
	code, out, stderr := run(t, "lab", "status", "--name", name, "--dir", dir, "--json")
	var st lab.Status
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil {
		t.Fatalf("lab status: exit %d, %v: %s", code, err, stderr)
	}
	// The causes the truth predicts: UDP 443 blocked towards a prefix
	// holding the test server's address of that family.
	var want []string
	kinds := map[string]bool{}
	for _, im := range st.Impairments {
		kinds[im.Path+" "+im.Kind] = true
		for _, r := range im.Rules {
			for f, a := range map[int]netip.Addr{4: lab.Server4, 6: lab.Server6} {
				if r.Proto == "udp" && r.Port == 443 && (!r.Prefix.IsValid() || r.Prefix.Contains(a)) {
					want = append(want, fmt.Sprintf("quic %s %d udp-blocked:443", im.Path, f))
				}
			}
		}
	}
	if !kinds["wwan0 nat64"] || !kinds["wwan0 cgnat"] || !kinds["wlan0 block"] || len(want) != 1 {
		t.Fatalf("truth %+v: want wwan0 nat64 and cgnat, wlan0 blocking UDP 443 towards the server over one family (%q)", st.Impairments, want)
	}
	code, fails, recs := smoke(t, name, dir, "--server="+lab.ServerName, "--transports", "tcp,quic", "--family", "both")
	if code != cmdutil.ExitCheckFailed || !slices.Equal(causes(recs), want) || len(fails) != 1 || !strings.Contains(fails[0], "(cause udp-blocked:443)") {
		t.Errorf("exit %d, causes %q, FAIL lines %q; want exit 7, %q on one line", code, causes(recs), fails, want)
	}
	passed := map[string]bool{}
	for _, r := range recs {
		if r.Status == "success" {
			passed[fmt.Sprintf("%s %s %d", r.Config.Transport, r.Config.Path, r.Config.Family)] = true
		}
	}
	for _, k := range []string{"tcp wlan0 4", "tcp wlan0 6", "quic wlan0 6", "tcp wwan0 6", "quic wwan0 6"} {
		if !passed[k] {
			t.Errorf("%s did not pass (records %+v)", k, recs)
		}
	}
}

// doctorCheck is one record of doctor --json.
type doctorCheck struct{ Status, Detail string }

// doctorChecks runs doctor FLAG --json in the lab and returns its exit
// code and the records of the check the flag adds (IDs ending in
// ".nat64" for --nat64), by ID.
func doctorChecks(t *testing.T, inLab func(args ...string) (int, string, string), flag string) (int, map[string]doctorCheck) {
	t.Helper()
	code, out, stderr := inLab("doctor", flag, "--json")
	var doc struct {
		Records []struct{ ID, Status, Detail string } `json:"records"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("doctor %s --json: exit %d, %v\n%s\n%s", flag, code, err, out, stderr)
	}
	checks := map[string]doctorCheck{}
	for _, r := range doc.Records {
		if strings.HasSuffix(r.ID, "."+strings.TrimPrefix(flag, "--")) {
			checks[r.ID] = doctorCheck{r.Status, r.Detail}
		}
	}
	return code, checks
}
