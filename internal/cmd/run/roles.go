package run

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/probe/doctor"
)

// hostRoles reconciles --backup with the host for the selected transports
// that take roles from it (HostRoles: MPTCP's backup flag lives on the
// kernel's endpoints, for every connection of the host). Without --backup
// the roles are the host's, so the results name what the kernel really did;
// with it, a path whose endpoint says otherwise is an error that gives the
// command that makes the host agree. eps nil: no such transport selected,
// or the endpoints could not be read (then --backup is taken as given).
func hostRoles(transports, backup []string, paths []probe.Path, eps []doctor.MPTCPEndpoint) ([]string, []string) {
	host := slices.ContainsFunc(transports, func(n string) bool {
		d, err := transport.Get(n)
		return err == nil && d.HostRoles
	})
	if !host || eps == nil {
		return backup, nil
	}
	var kernel, problems []string
	for _, p := range paths {
		ep, ok := endpointOf(p, eps)
		if !ok {
			continue // no endpoint: MPTCP opens no subflow there (doctor says so)
		}
		if ep.Backup {
			kernel = append(kernel, p.Name)
		}
		if backup == nil {
			continue
		}
		want := slices.Contains(backup, p.Name)
		switch {
		case want && !ep.Backup:
			problems = append(problems, fmt.Sprintf("%s is not a backup path for MPTCP on this host: ip mptcp endpoint change id %d backup", p.Name, ep.ID))
		case !want && ep.Backup:
			problems = append(problems, fmt.Sprintf("%s is a backup path for MPTCP on this host: ip mptcp endpoint change id %d nobackup (or add it to --backup)", p.Name, ep.ID))
		}
	}
	if backup == nil {
		return kernel, nil
	}
	return backup, problems
}

// endpointOf is the path's endpoint: its device, or one of its addresses.
func endpointOf(p probe.Path, eps []doctor.MPTCPEndpoint) (doctor.MPTCPEndpoint, bool) {
	for _, ep := range eps {
		if ep.Dev != "" && ep.Dev == p.Name {
			return ep, true
		}
		a, err := netip.ParseAddr(ep.Address)
		if err != nil {
			continue
		}
		for _, pa := range p.Addrs {
			if pa.IP == a.Unmap() {
				return ep, true
			}
		}
	}
	return doctor.MPTCPEndpoint{}, false
}
