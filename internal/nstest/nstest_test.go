package nstest

import (
	"net"
	"slices"
	"testing"
)

func TestRunPattern(t *testing.T) {
	for in, want := range map[string]string{
		"TestA":         "^TestA$",
		"TestA/sub_1":   "^TestA$/^sub_1$",
		"TestA/x.y(z)+": `^TestA$/^x\.y\(z\)\+$`,
	} {
		if got := runPattern(in); got != want {
			t.Errorf("runPattern(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestInNS builds a namespace with a veth to a second one, checks from
// inside that only lo and wlan0 exist, changes the namespace and checks the
// second child sees the change.
func TestInNS(t *testing.T) {
	ns := New(t)
	gw := New(t)
	ns.Veth("wlan0", gw, "gw0")
	ns.IP("addr", "add", "198.18.1.2/24", "dev", "wlan0")
	gw.IP("addr", "add", "198.18.1.1/24", "dev", "gw0")

	if InNS(t, ns) {
		if got := ifaceNames(t); !slices.Equal(got, []string{"lo", "wlan0"}) {
			t.Fatalf("interfaces in namespace = %v, want [lo wlan0]", got)
		}
		if !hasAddr(t, "wlan0", "198.18.1.2") {
			t.Fatal("wlan0 lacks 198.18.1.2")
		}
		return
	}
	ns.IP("addr", "add", "198.18.1.3/24", "dev", "wlan0")
	if InNS(t, ns) {
		if !hasAddr(t, "wlan0", "198.18.1.3") {
			t.Fatal("second child does not see the address the parent added")
		}
		return
	}
	if IsChild() {
		t.Fatal("child reached parent-only code")
	}
}

func ifaceNames(t *testing.T) []string {
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	slices.Sort(names)
	return names
}

func hasAddr(t *testing.T, iface, ip string) bool {
	ifc, err := net.InterfaceByName(iface)
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.String() == ip {
			return true
		}
	}
	return false
}

// TestInNSSubtest: a subtest re-executes alone, its parent test running
// only as far as t.Run.
func TestInNSSubtest(t *testing.T) {
	t.Run("sub 1", func(t *testing.T) {
		ns := New(t)
		if InNS(t, ns) {
			if got := ifaceNames(t); !slices.Equal(got, []string{"lo"}) {
				t.Fatalf("interfaces in a fresh namespace = %v, want [lo]", got)
			}
			return
		}
	})
}
