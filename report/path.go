package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
)

// Path is what the envelope records of one network path: the fields of
// probe.Path as results store them (the same JSON). report imports no
// socket code, so readers of results (the collect server, the renderer)
// need none; NewHeader reads a probe.Path from its JSON, which is this
// type's (so probe imports no result model either).
type Path struct {
	Name         string      `json:"name"`
	Index        int         `json:"index"`
	Kind         string      `json:"kind"`
	Up           bool        `json:"up"`
	Flags        []string    `json:"flags"`
	MTU          int         `json:"mtu"`
	Addrs        []PathAddr  `json:"addresses"`
	DefaultRoute bool        `json:"default_route"`
	DNS          []DNSServer `json:"dns"`
}

// PathAddr is one address of a path.
type PathAddr struct {
	IP        netip.Addr `json:"ip"`
	PrefixLen int        `json:"prefix_len"`
	Scope     string     `json:"scope"`
}

// DNSServer is one resolver of a path and where it was learnt.
type DNSServer struct {
	Addr   netip.AddrPort `json:"addr"`
	Source string         `json:"source"`
	Shared bool           `json:"shared,omitempty"`
}

// Pather is anything that can say what the envelope records of it as a
// path (probe.Path).
type Pather interface{ ReportPath() Path }

// ReportPath makes Path a Pather.
func (p Path) ReportPath() Path { return p }

// pathRecords converts paths to their records: a Pather says its own, any
// other value is read from its JSON, which must be exactly a Path's (a
// field Path does not have is an error, never dropped).
func pathRecords[P any](ps []P) ([]Path, error) {
	out := make([]Path, 0, len(ps))
	for i, p := range ps {
		if pp, ok := any(p).(Pather); ok {
			out = append(out, pp.ReportPath())
			continue
		}
		b, err := json.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("path %d (%T): %w", i, p, err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var r Path
		if err := dec.Decode(&r); err != nil {
			return nil, fmt.Errorf("path %d (%T) is not a path record: %w", i, p, err)
		}
		out = append(out, r)
	}
	return out, nil
}
