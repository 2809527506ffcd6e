package probe

import (
	"fmt"
	"slices"
)

// PathChange is how one path differs between two discoveries: the one
// definition of "the network changed" that stable mode (patterns), the
// survey watcher and the mobile mode share. 000 §II-A: a test is invalid
// when a path appears, disappears or changes address while it runs.
type PathChange struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

func (c PathChange) String() string { return c.Path + ": " + c.Reason }

// PathChanges compares the paths named in watch, and with defaultRoutes
// every path that has a default route in either discovery, and returns
// their changes ordered by name: the interface appeared, disappeared, went
// down or came up, or its addresses changed. Link-local addresses are not
// compared: they do not identify a way out (see Scope) and come and go
// with the link.
func PathChanges(before, now []Path, watch []string, defaultRoutes bool) []PathChange {
	names := slices.Clone(watch)
	for _, ps := range [][]Path{before, now} {
		for _, p := range ps {
			if defaultRoutes && p.DefaultRoute && !slices.Contains(names, p.Name) {
				names = append(names, p.Name)
			}
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	var out []PathChange
	for _, n := range names {
		b, errB := FindPath(before, n)
		a, errA := FindPath(now, n)
		reason := ""
		switch {
		case errB != nil && errA != nil:
		case errA != nil:
			reason = "interface disappeared"
		case errB != nil:
			reason = "interface appeared"
		case b.Up && !a.Up:
			reason = "interface went down"
		case !b.Up && a.Up:
			reason = "interface came up"
		case !slices.Equal(outwardAddrs(b), outwardAddrs(a)):
			reason = fmt.Sprintf("addresses changed from %v to %v", outwardAddrs(b), outwardAddrs(a))
		}
		if reason != "" {
			out = append(out, PathChange{Path: n, Reason: reason})
		}
	}
	return out
}

// outwardAddrs are a path's addresses other than link-local ones, sorted.
func outwardAddrs(p Path) []string {
	s := []string{}
	for _, a := range p.Addrs {
		if a.Scope != ScopeLinkLocal {
			s = append(s, a.IP.String())
		}
	}
	slices.Sort(s)
	return s
}
