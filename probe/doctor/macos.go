package doctor

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/mptester/mptester/probe"
)

// What `doctor` can check on macOS, where MPTCP is Network.framework's:
// the macOS version, that the framework loads, that it lists each path's
// interface (mptcp requires the primary's), and a reminder of what
// aggregate mode needs. The facts are read on the Mac (checks_darwin.go);
// turning them into checks is plain Go, tested everywhere.

// macOSFacts are what the macOS checks read.
type macOSFacts struct {
	// Version is sysctl kern.osproductversion ("14.5"); VersionErr when
	// it could not be read.
	Version    string
	VersionErr error
	// Framework is the error loading Network.framework (nil: loaded).
	Framework error
	// Listed says whether the framework lists an interface (nil: yes).
	Listed func(name string) error
}

// minMacOS is the first macOS with every call the bindings make.
var minMacOS = [2]int{10, 15}

// parseMacOSVersion reads "major.minor[.patch]".
func parseMacOSVersion(s string) ([2]int, error) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	var v [2]int
	if len(parts) == 1 {
		parts = append(parts, "0") // "11" is 11.0
	}
	for i := range 2 {
		n, err := strconv.Atoi(parts[i])
		if err != nil || n < 0 {
			return v, fmt.Errorf("macOS version %q", s)
		}
		v[i] = n
	}
	return v, nil
}

func macOSChecks(f macOSFacts, paths []probe.Path) []Check {
	var out []Check
	ver := Check{ID: "macos.version", Title: "macOS version"}
	v, err := parseMacOSVersion(f.Version)
	switch {
	case f.VersionErr != nil:
		ver.Status, ver.Detail = StatusWarn, "cannot read kern.osproductversion: "+f.VersionErr.Error()
	case err != nil:
		ver.Status, ver.Detail = StatusWarn, "cannot parse "+err.Error()
	case v[0] < minMacOS[0] || (v[0] == minMacOS[0] && v[1] < minMacOS[1]):
		ver.Status = StatusFail
		ver.Detail = fmt.Sprintf("macOS %s: mptcp needs macOS %d.%d or later (Network.framework's multipath service and establishment report)", f.Version, minMacOS[0], minMacOS[1])
	default:
		ver.Status = StatusOK
		ver.Detail = fmt.Sprintf("macOS %s: MPTCP through Network.framework; per-subflow state (tcp_info, subflows, retransmissions) is not available on macOS", f.Version)
	}
	out = append(out, ver)

	fw := Check{ID: "macos.network-framework", Title: "Network.framework"}
	if f.Framework != nil {
		fw.Status, fw.Detail = StatusFail, "cannot load it: "+f.Framework.Error()+"; the mptcp transport cannot run"
	} else {
		fw.Status, fw.Detail = StatusOK, "loaded (no cgo): the mptcp transport dials through it"
	}
	out = append(out, fw)

	ports := outwardPaths(paths)
	for _, p := range ports {
		c := Check{ID: "macos.interface." + p.Name, Title: "Network.framework lists " + p.Name}
		switch {
		case f.Framework != nil:
			c.Status, c.Detail = StatusWarn, "not checked: Network.framework did not load"
		case f.Listed == nil:
			c.Status, c.Detail = StatusWarn, "not checked"
		default:
			if err := f.Listed(p.Name); err != nil {
				c.Status = StatusFail
				c.Detail = fmt.Sprintf("%s (%s) is up but Network.framework does not list it: mptcp cannot require it as the primary path (%v)", p.Name, p.Kind, err)
			} else {
				c.Status, c.Detail = StatusOK, fmt.Sprintf("%s (%s): usable as mptcp's primary path", p.Name, p.Kind)
			}
		}
		out = append(out, c)
	}
	if len(ports) == 0 {
		out = append(out, Check{ID: "macos.interfaces", Title: "Interfaces", Status: StatusWarn,
			Detail: "no interface is up with a global address and a default route"})
	} else if len(ports) == 1 {
		out = append(out, Check{ID: "macos.multipath", Title: "Second path", Status: StatusWarn,
			Detail: "only " + ports[0].Name + " is usable: MPTCP has no second interface to add a subflow on"})
	}
	out = append(out, Check{ID: "macos.aggregate", Title: "MPTCP aggregate mode", Status: StatusOK,
		Detail: "handover and interactive need nothing; aggregate (--mptcp-service aggregate) is for experimentation and Apple enables it only with its developer Multipath setting (documented for iOS: Settings > Developer > Multipath Networking); whether the server saw MPTCP is checked by scripts/macos-smoke SERVER"})
	return out
}
